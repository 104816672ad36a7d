// The real supabase-js client signing in through an OpenID provider (npm's oidc-provider): run by
// tests/it/accounts_oauth.rs with ROWGATE_URL (a server whose provider `test` is that one),
// ROWGATE_JWT_SECRET, and OIDC_ISSUER, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET for a token of its
// own. What a browser does between the calls (the provider's login, following redirects) is
// done by browser.mjs; the app's side is supabase's documented code.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import crypto from 'node:crypto'
import { execFileSync } from 'node:child_process'
import WebSocket from 'ws'
import { createClient } from '@supabase/supabase-js'
import { jwt } from './jwt.mjs'
import { signInAt } from './browser.mjs'

const url = process.env.ROWGATE_URL
const anonKey = jwt({ role: 'anon', exp: Math.floor(Date.now() / 1000) + 3600 })
const run = crypto.randomBytes(4).toString('hex')
const client = (flowType) =>
  createClient(url, anonKey, {
    auth: { persistSession: false, autoRefreshToken: false, detectSessionInUrl: false, flowType },
    realtime: { transport: WebSocket },
  })

// What the browser does with the URL signInWithOAuth gives: through rowgate and the provider's
// login, back through rowgate's callback: the URL the app's page is finally sent to.
async function browse(start, login) {
  const toProvider = await fetch(start, { redirect: 'manual' })
  assert.equal(toProvider.status, 302)
  const callback = await signInAt(toProvider.headers.get('location'), { login, stopAt: `${url}/auth/v1/callback` })
  const back = await fetch(callback, { redirect: 'manual' })
  assert.equal(back.status, 302)
  return new URL(back.headers.get('location'))
}

test('signInWithOAuth, then the session from the page it leads back to', async () => {
  const supabase = client('implicit')
  const { data, error } = await supabase.auth.signInWithOAuth({
    provider: 'test',
    options: { redirectTo: 'http://app.test/welcome', skipBrowserRedirect: true },
  })
  assert.equal(error, null)
  const landed = await browse(data.url, `fay-${run}`)
  assert.equal(landed.origin + landed.pathname, 'http://app.test/welcome')
  const fragment = new URLSearchParams(landed.hash.slice(1))
  const { data: session, error: failed } = await supabase.auth.setSession({
    access_token: fragment.get('access_token'),
    refresh_token: fragment.get('refresh_token'),
  })
  assert.equal(failed, null)
  assert.equal(session.user.email, `fay-${run}@example.com`)
  assert.equal(session.user.app_metadata.provider, 'test')
  const { data: identities } = await supabase.auth.getUserIdentities()
  assert.deepEqual(identities.identities.map((i) => i.provider), ['test'])
})

test('signInWithOAuth in a PKCE flow, the code exchanged for the session', async () => {
  const supabase = client('pkce')
  const { data, error } = await supabase.auth.signInWithOAuth({
    provider: 'test',
    options: { redirectTo: 'http://app.test/callback', skipBrowserRedirect: true },
  })
  assert.equal(error, null)
  assert.ok(new URL(data.url).searchParams.get('code_challenge'))
  const landed = await browse(data.url, `gus-${run}`)
  const code = landed.searchParams.get('code')
  assert.ok(code, landed.href)
  const { data: exchanged, error: failed } = await supabase.auth.exchangeCodeForSession(code)
  assert.equal(failed, null)
  assert.equal(exchanged.user.email, `gus-${run}@example.com`)
  const { data: user } = await supabase.auth.getUser()
  assert.equal(user.user.identities[0].identity_data.name, `User gus-${run}`)
})

test('signInWithIdToken with a token the app got from the provider itself', async () => {
  const nonce = crypto.randomBytes(16).toString('hex')
  const token = execFileSync(process.execPath, [
    'sign_in_at.mjs',
    '--id-token',
    process.env.OIDC_ISSUER,
    process.env.OIDC_CLIENT_ID,
    process.env.OIDC_CLIENT_SECRET,
    `${url}/auth/v1/callback`,
    `hal-${run}`,
    nonce,
  ]).toString().trim()
  const supabase = client('implicit')
  const { data, error } = await supabase.auth.signInWithIdToken({ provider: 'test', token, nonce })
  assert.equal(error, null)
  assert.equal(data.user.email, `hal-${run}@example.com`)
  const { error: refused } = await supabase.auth.signInWithIdToken({ provider: 'test', token, nonce: 'not it' })
  assert.equal(refused.status, 400)
})

test('linkIdentity, then unlinkIdentity, for a signed-in user', async () => {
  const supabase = client('implicit')
  const { error: signUpError } = await supabase.auth.signUp({ email: `kit-${run}@example.com`, password: 'kit-s-password' })
  assert.equal(signUpError, null)
  const { data, error } = await supabase.auth.linkIdentity({
    provider: 'test',
    options: { redirectTo: 'http://app.test/linked', skipBrowserRedirect: true },
  })
  assert.equal(error, null)
  const callback = await signInAt(data.url, { login: `kit-at-work-${run}`, stopAt: `${url}/auth/v1/callback` })
  const back = await fetch(callback, { redirect: 'manual' })
  assert.ok(back.headers.get('location').startsWith('http://app.test/linked#access_token='))
  const { data: linked } = await supabase.auth.getUserIdentities()
  assert.deepEqual(linked.identities.map((i) => i.provider), ['email', 'test'])
  const { error: unlinkError } = await supabase.auth.unlinkIdentity(linked.identities.find((i) => i.provider === 'test'))
  assert.equal(unlinkError, null)
  const { data: after } = await supabase.auth.getUserIdentities()
  assert.deepEqual(after.identities.map((i) => i.provider), ['email'])
})
