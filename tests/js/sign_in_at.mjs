// For the Rust tests of sign-in through an OpenID provider: walks a browser's way from URL
// through the test provider's login (as LOGIN) and prints the first redirect to STOP_AT (or,
// for a form the provider posts there, `POST <action> <form>`).
//
//   node sign_in_at.mjs URL LOGIN STOP_AT
//
// With `--id-token ISSUER CLIENT_ID SECRET REDIRECT LOGIN NONCE` instead, it signs in at the
// provider as a client of its own would (supabase-js's signInWithIdToken gets its token so) and
// prints the ID token, whose nonce claim is the SHA-256 (hex) of NONCE.
import crypto from 'node:crypto'
import { signInAt } from './browser.mjs'

const args = process.argv.slice(2)
if (args[0] === '--id-token') {
  const [, issuer, clientId, secret, redirect, login, nonce] = args
  const discovery = await (await fetch(`${issuer}/.well-known/openid-configuration`)).json()
  const verifier = crypto.randomBytes(32).toString('base64url')
  const url = new URL(discovery.authorization_endpoint)
  url.search = new URLSearchParams({
    client_id: clientId,
    redirect_uri: redirect,
    response_type: 'code',
    scope: 'openid email profile',
    state: crypto.randomBytes(8).toString('base64url'),
    nonce: crypto.createHash('sha256').update(nonce).digest('hex'),
    code_challenge: crypto.createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
  })
  const code = new URL(await signInAt(url.href, { login, stopAt: redirect })).searchParams.get('code')
  const response = await fetch(discovery.token_endpoint, {
    method: 'POST',
    headers: {
      authorization: 'Basic ' + Buffer.from(`${clientId}:${secret}`).toString('base64'),
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: redirect, code_verifier: verifier }),
  })
  const tokens = await response.json()
  if (!tokens.id_token) throw new Error(`no ID token: ${JSON.stringify(tokens)}`)
  console.log(tokens.id_token)
} else {
  const [url, login, stopAt] = args
  const answer = await signInAt(url, { login, stopAt })
  console.log(typeof answer === 'string' ? answer : `POST ${answer.post} ${answer.body}`)
}
