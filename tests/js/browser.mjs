// Just enough of a browser to sign in through an OpenID provider's pages for a test: a cookie
// jar, redirects followed by hand, and the login and consent forms of oidc-provider's
// development interactions (oidc_provider.mjs) filled in and submitted.
//
//   const callback = await signInAt(authorizeUrl, { login: 'alice', stopAt: 'http://127.0.0.1:…/callback' })
//
// Returns the first redirect target that starts with `stopAt`, unrequested, so the test can
// look at it (code, state, error) or hand it on; or, for a provider that answers with a form
// posted to `stopAt` (`response_mode=form_post`), `{ post, body }`, unsent.

const MAX_STEPS = 20
const REDIRECTS = new Set([301, 302, 303, 307, 308])

// Cookies by host:port, each host's keyed by name and path as a browser keeps them.
function cookieJar() {
  const hosts = new Map()

  function store(url, response) {
    const { host, pathname } = new URL(url)
    let cookies = hosts.get(host)
    if (!cookies) hosts.set(host, (cookies = new Map()))
    for (const line of response.headers.getSetCookie()) {
      const [pair, ...attributes] = line.split(';')
      const eq = pair.indexOf('=')
      if (eq < 1) continue
      const name = pair.slice(0, eq).trim()
      const value = pair.slice(eq + 1).trim()
      // Without a Path attribute a cookie belongs to the request's directory (RFC 6265 5.1.4).
      let path = pathname.slice(0, pathname.lastIndexOf('/')) || '/'
      let expired = value === ''
      for (const attribute of attributes) {
        const [key, ...rest] = attribute.split('=')
        const attrValue = rest.join('=').trim()
        switch (key.trim().toLowerCase()) {
          case 'path':
            if (attrValue.startsWith('/')) path = attrValue
            break
          case 'expires':
            if (Date.parse(attrValue) <= Date.now()) expired = true
            break
          case 'max-age':
            if (Number(attrValue) <= 0) expired = true
            break
        }
      }
      const key = `${name}\0${path}`
      if (expired) cookies.delete(key)
      else cookies.set(key, { name, value, path })
    }
  }

  function header(url) {
    const { host, pathname } = new URL(url)
    const matches = (path) =>
      pathname === path || (pathname.startsWith(path) && (path.endsWith('/') || pathname[path.length] === '/'))
    const sent = [...(hosts.get(host)?.values() ?? [])].filter((c) => matches(c.path))
    // Longer paths first, as browsers order them.
    sent.sort((a, b) => b.path.length - a.path.length)
    return sent.map((c) => `${c.name}=${c.value}`).join('; ')
  }

  return { store, header }
}

const decodeEntities = (s) =>
  s.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&')

// Attributes of every `<tag …>` in the page, attribute order being the template's business.
function tags(html, tag) {
  const found = []
  for (const [, inside] of html.matchAll(new RegExp(`<${tag}\\b([^>]*)>`, 'gi'))) {
    const attrs = {}
    for (const [, name, value] of inside.matchAll(/([\w-]+)\s*=\s*"([^"]*)"/g)) {
      attrs[name.toLowerCase()] = decodeEntities(value)
    }
    found.push(attrs)
  }
  return found
}

// The form oidc-provider's development interaction page asks for, as a body to submit.
function interactionForm(html, login) {
  const prompt = tags(html, 'input').find((a) => a.name === 'prompt')?.value
  const action = tags(html, 'form')[0]?.action
  switch (prompt) {
    case 'login':
      return { action, body: new URLSearchParams({ prompt, login, password: 'x' }) }
    case 'consent':
      return { action, body: new URLSearchParams({ prompt }) }
    default:
      return undefined
  }
}

export async function signInAt(url, { login, stopAt }) {
  const jar = cookieJar()
  let request = { url: new URL(url).href, method: 'GET', body: undefined }
  let last = { status: undefined, url: request.url, body: '' }
  let step = 0

  for (; step < MAX_STEPS; step++) {
    const headers = { accept: 'text/html,*/*' }
    const cookie = jar.header(request.url)
    if (cookie) headers.cookie = cookie
    if (request.body) headers['content-type'] = 'application/x-www-form-urlencoded'
    const response = await fetch(request.url, {
      method: request.method,
      headers,
      body: request.body?.toString(),
      redirect: 'manual',
    })
    jar.store(request.url, response)
    const body = await response.text()
    last = { status: response.status, url: request.url, body }

    const location = response.headers.get('location')
    if (REDIRECTS.has(response.status) && location) {
      const next = new URL(location, request.url).href
      if (next.startsWith(stopAt)) return next
      // 307 and 308 repeat the request as it was; the others turn it into a GET.
      request = [307, 308].includes(response.status) ? { ...request, url: next } : { url: next, method: 'GET', body: undefined }
      continue
    }

    const onInteraction = /^\/interaction\/[^/]+$/.test(new URL(request.url).pathname)
    const isHtml = (response.headers.get('content-type') ?? '').includes('text/html')
    // A provider answering with `response_mode=form_post`: a page whose form posts to `stopAt`.
    const posted = isHtml ? tags(body, 'form').find((f) => (f.method ?? '').toLowerCase() === 'post') : undefined
    if (posted?.action && new URL(posted.action, request.url).href.startsWith(stopAt)) {
      const fields = tags(body, 'input').filter((i) => i.type === 'hidden' && i.name)
      return { post: new URL(posted.action, request.url).href, body: new URLSearchParams(fields.map((i) => [i.name, i.value ?? ''])).toString() }
    }
    if (response.ok && request.method === 'GET' && onInteraction && isHtml) {
      const form = interactionForm(body, login)
      if (form) {
        request = { url: new URL(form.action ?? request.url, request.url).href, method: 'POST', body: form.body }
        continue
      }
    }
    break
  }

  throw new Error(
    `signInAt: ${step === MAX_STEPS ? `no redirect to ${stopAt} in ${MAX_STEPS} requests` : 'unexpected response'}; ` +
      `last was ${last.status} from ${last.url}: ${last.body.slice(0, 500)}`,
  )
}
