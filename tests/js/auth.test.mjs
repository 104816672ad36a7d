// The real supabase-js client's `auth` (auth-js) against rowgate's /auth/v1, with mail: run by
// tests/it/accounts_mail.rs with ROWGATE_URL (a server that mails through an SMTP server whose
// maildir is MAILDIR, with anonymous sign-ins on) and ROWGATE_JWT_SECRET. Each test is what an
// app's code does, as supabase's documentation writes it.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import crypto from 'node:crypto'
import WebSocket from 'ws'
import { createClient } from '@supabase/supabase-js'
import { jwt } from './jwt.mjs'
import { Authenticator } from './authenticator.mjs'

const url = process.env.ROWGATE_URL
const maildir = path.join(process.env.MAILDIR, 'new')
const hour = () => Math.floor(Date.now() / 1000) + 3600
const anonKey = jwt({ role: 'anon', exp: hour() })
const serviceKey = jwt({ role: 'service_role', exp: hour() })
const run = crypto.randomBytes(4).toString('hex')
const address = (name) => `${name}-${run}@example.com`

// A client as an app makes one: in memory, no session kept between tests (and Node 20's
// WebSocket for its realtime client, which these tests do not use).
const options = { auth: { persistSession: false, autoRefreshToken: false }, realtime: { transport: WebSocket } }
const client = () => createClient(url, anonKey, options)
const admin = () => createClient(url, serviceKey, options)

const taken = new Set()
// The next mail to `to`: its decoded body.
async function mailTo(to) {
  for (let i = 0; i < 200; i++) {
    for (const name of fs.existsSync(maildir) ? fs.readdirSync(maildir) : []) {
      if (taken.has(name)) continue
      const text = fs.readFileSync(path.join(maildir, name), 'utf8').replace(/\r\n/g, '\n')
      if (!text.split('\n').some((l) => l.toLowerCase() === `x-rcptto: ${to}`)) continue
      taken.add(name)
      const [head, ...rest] = text.split('\n\n')
      const body = rest.join('\n\n')
      const encoding = (head.match(/^content-transfer-encoding:\s*(\S+)/im) || [])[1]?.toLowerCase()
      if (encoding === 'base64') return Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8')
      if (encoding === 'quoted-printable') {
        return Buffer.from(
          body.replace(/=\n/g, '').replace(/=([0-9A-F]{2})/gi, (_, h) => String.fromCharCode(parseInt(h, 16))),
          'latin1',
        ).toString('utf8')
      }
      return body
    }
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`no mail to ${to}`)
}
const codeIn = (body) => body.match(/code: (\d{6})/)[1]
const tokenLinkIn = (body) => body.match(/href="([^"]+)"/)[1].replace(/&amp;/g, '&')
const tokenHashIn = (body) => new URL(tokenLinkIn(body)).searchParams.get('token')

test('sign up, confirm with the code mailed, then sign in and change one’s data', async () => {
  const supabase = client()
  const email = address('ada')
  const { data, error } = await supabase.auth.signUp({
    email,
    password: 'secret-ada',
    options: { data: { name: 'Ada' }, emailRedirectTo: 'http://localhost:5173/welcome' },
  })
  assert.equal(error, null)
  assert.equal(data.session, null)
  assert.equal(data.user.email, email)
  assert.deepEqual(data.user.user_metadata, { name: 'Ada' })

  const refused = await supabase.auth.signInWithPassword({ email, password: 'secret-ada' })
  assert.equal(refused.error?.code, 'email_not_confirmed')

  const mail = await mailTo(email)
  assert.match(mail, /redirect_to=http%3A%2F%2Flocalhost%3A5173%2Fwelcome/)
  const verified = await supabase.auth.verifyOtp({ email, token: codeIn(mail), type: 'signup' })
  assert.equal(verified.error, null)
  assert.equal(verified.data.user.email, email)
  assert.ok(verified.data.session.access_token)

  const { data: got } = await supabase.auth.getUser()
  assert.equal(got.user.id, verified.data.user.id)
  assert.ok(got.user.email_confirmed_at)
  const updated = await supabase.auth.updateUser({ data: { name: 'Ada L.', lang: 'en' } })
  assert.equal(updated.error, null)
  assert.deepEqual(updated.data.user.user_metadata, { name: 'Ada L.', lang: 'en' })
  assert.equal((await supabase.auth.signOut()).error, null)

  const again = await client().auth.signInWithPassword({ email, password: 'secret-ada' })
  assert.equal(again.error, null)
  assert.equal(again.data.user.user_metadata.name, 'Ada L.')
})

test('reset a forgotten password from the recovery mail', async () => {
  const supabase = client()
  const email = address('bea')
  await supabase.auth.signUp({ email, password: 'secret-bea' })
  await supabase.auth.verifyOtp({ email, token: codeIn(await mailTo(email)), type: 'signup' })
  await supabase.auth.signOut()

  const asked = await supabase.auth.resetPasswordForEmail(email, { redirectTo: 'http://localhost:5173/reset' })
  assert.equal(asked.error, null)
  const mail = await mailTo(email)
  const { error } = await supabase.auth.verifyOtp({ token_hash: tokenHashIn(mail), type: 'recovery' })
  assert.equal(error, null)
  assert.equal((await supabase.auth.updateUser({ password: 'new-secret-bea' })).error, null)
  await supabase.auth.signOut()
  assert.equal((await client().auth.signInWithPassword({ email, password: 'secret-bea' })).error?.code, 'invalid_credentials')
  assert.equal((await client().auth.signInWithPassword({ email, password: 'new-secret-bea' })).error, null)
})

test('sign in with a one-time code, and anonymously', async () => {
  const supabase = client()
  const email = address('cal')
  const sent = await supabase.auth.signInWithOtp({ email, options: { shouldCreateUser: true, data: { via: 'otp' } } })
  assert.equal(sent.error, null)
  const { data, error } = await supabase.auth.verifyOtp({ email, token: codeIn(await mailTo(email)), type: 'email' })
  assert.equal(error, null)
  assert.equal(data.user.user_metadata.via, 'otp')
  const none = await client().auth.signInWithOtp({ email: address('nobody'), options: { shouldCreateUser: false } })
  assert.equal(none.error?.code, 'otp_disabled')

  const visitor = client()
  const anon = await visitor.auth.signInAnonymously({ options: { data: { theme: 'dark' } } })
  assert.equal(anon.error, null)
  assert.equal(anon.data.user.is_anonymous, true)
  const refreshed = await visitor.auth.refreshSession()
  assert.equal(refreshed.error, null)
  assert.equal(refreshed.data.user.is_anonymous, true)
})

test('administer users with the service role key', async () => {
  const { auth } = admin()
  const email = address('dee')
  const created = await auth.admin.createUser({ email, password: 'secret-dee', email_confirm: true, user_metadata: { team: 'x' } })
  assert.equal(created.error, null)
  const id = created.data.user.id
  assert.equal((await client().auth.signInWithPassword({ email, password: 'secret-dee' })).error, null)

  const page = await auth.admin.listUsers({ page: 1, perPage: 1 })
  assert.equal(page.error, null)
  assert.equal(page.data.users.length, 1)
  assert.ok(page.data.total >= 1)
  assert.equal((await auth.admin.getUserById(id)).data.user.email, email)
  const banned = await auth.admin.updateUserById(id, { ban_duration: '1h' })
  assert.ok(banned.data.user.banned_until)
  assert.equal((await client().auth.signInWithPassword({ email, password: 'secret-dee' })).error?.code, 'user_banned')

  const link = await auth.admin.generateLink({ type: 'magiclink', email })
  assert.equal(link.error, null)
  assert.equal(link.data.properties.verification_type, 'magiclink')
  assert.match(link.data.properties.action_link, /\/auth\/v1\/verify\?token=/)
  assert.equal(link.data.user.email, email)

  assert.equal((await auth.admin.deleteUser(id)).error, null)
  assert.equal((await auth.admin.getUserById(id)).error?.status, 404)
  const forbidden = await client().auth.admin.listUsers()
  assert.equal(forbidden.error?.status, 403)
})

// What an authenticator app shows now for a base32 `secret` (RFC 6238: SHA-1, 6 digits, 30 s).
function totp(secret) {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'
  let bits = ''
  for (const c of secret.replace(/=+$/, '')) bits += alphabet.indexOf(c).toString(2).padStart(5, '0')
  const key = Buffer.from(bits.match(/.{8}/g).map((b) => parseInt(b, 2)))
  const counter = Buffer.alloc(8)
  counter.writeBigUInt64BE(BigInt(Math.floor(Date.now() / 1000 / 30)))
  const mac = crypto.createHmac('sha1', key).update(counter).digest()
  const offset = mac[mac.length - 1] & 0xf
  return String((mac.readUInt32BE(offset) & 0x7fffffff) % 1_000_000).padStart(6, '0')
}

test('a second factor from an authenticator app', async () => {
  const supabase = client()
  const email = address('eli')
  await supabase.auth.signUp({ email, password: 'secret-eli' })
  await supabase.auth.verifyOtp({ email, token: codeIn(await mailTo(email)), type: 'signup' })

  const enrolled = await supabase.auth.mfa.enroll({ factorType: 'totp', friendlyName: 'phone' })
  assert.equal(enrolled.error, null)
  assert.match(enrolled.data.totp.uri, /^otpauth:\/\/totp\//)
  const factorId = enrolled.data.id
  const challenge = await supabase.auth.mfa.challenge({ factorId })
  assert.equal(challenge.error, null)
  const verified = await supabase.auth.mfa.verify({ factorId, challengeId: challenge.data.id, code: totp(enrolled.data.totp.secret) })
  assert.equal(verified.error, null)
  const level = await supabase.auth.mfa.getAuthenticatorAssuranceLevel()
  assert.equal(level.data.currentLevel, 'aal2')
  assert.equal(level.data.nextLevel, 'aal2')
  const listed = await supabase.auth.mfa.listFactors()
  assert.deepEqual(listed.data.totp.map((f) => f.id), [factorId])

  const other = client()
  await other.auth.signInWithPassword({ email, password: 'secret-eli' })
  const needed = await other.auth.mfa.getAuthenticatorAssuranceLevel()
  assert.deepEqual([needed.data.currentLevel, needed.data.nextLevel], ['aal1', 'aal2'])
  assert.equal((await supabase.auth.mfa.unenroll({ factorId })).error, null)
})

test('a second factor from a security key (WebAuthn)', async () => {
  const supabase = client()
  const email = address('kit')
  await supabase.auth.signUp({ email, password: 'secret-kit' })
  await supabase.auth.verifyOtp({ email, token: codeIn(await mailTo(email)), type: 'signup' })
  // The page's origin is the site's (accounts-site-url), whose host is the relying party.
  const key = new Authenticator('http://app.test')
  const webauthn = { rpId: 'app.test', rpOrigins: ['http://app.test'] }

  const enrolled = await supabase.auth.mfa.enroll({ factorType: 'webauthn', friendlyName: 'yubikey' })
  assert.equal(enrolled.error, null)
  assert.deepEqual([enrolled.data.type, enrolled.data.friendly_name], ['webauthn', 'yubikey'])
  const factorId = enrolled.data.id
  const created = await supabase.auth.mfa.challenge({ factorId, webauthn })
  assert.equal(created.error, null)
  assert.equal(created.data.webauthn.type, 'create')
  const credential_response = key.create(created.data.webauthn.credential_options)
  const registered = await supabase.auth.mfa.verify({
    factorId,
    challengeId: created.data.id,
    webauthn: { type: 'create', ...webauthn, credential_response },
  })
  assert.equal(registered.error, null)
  const claims = JSON.parse(Buffer.from(registered.data.access_token.split('.')[1], 'base64url'))
  assert.deepEqual([claims.aal, claims.amr[0].method], ['aal2', 'mfa/webauthn'])
  assert.deepEqual((await supabase.auth.mfa.listFactors()).data.all.map((f) => [f.factor_type, f.status]), [
    ['webauthn', 'verified'],
  ])
  // A second key's registration excludes the first's credential: one key is not two factors.
  const backup = await supabase.auth.mfa.enroll({ factorType: 'webauthn', friendlyName: 'backup' })
  const second = await supabase.auth.mfa.challenge({ factorId: backup.data.id, webauthn })
  const excluded = second.data.webauthn.credential_options.publicKey.excludeCredentials ?? []
  assert.deepEqual(excluded.map((c) => Buffer.from(c.id).toString('base64url')), [credential_response.id])
  assert.equal((await supabase.auth.mfa.unenroll({ factorId: backup.data.id })).error, null)

  // Signing in again, the key is asked for; a page of another origin cannot answer for it.
  const other = client()
  await other.auth.signInWithPassword({ email, password: 'secret-kit' })
  const level = await other.auth.mfa.getAuthenticatorAssuranceLevel()
  assert.deepEqual([level.data.currentLevel, level.data.nextLevel], ['aal1', 'aal2'])
  const requested = await other.auth.mfa.challenge({ factorId, webauthn })
  assert.equal(requested.data.webauthn.type, 'request')
  const phished = new Authenticator('http://app.test.evil')
  phished.credentials = key.credentials
  const refused = await other.auth.mfa.verify({
    factorId,
    challengeId: requested.data.id,
    webauthn: { type: 'request', ...webauthn, credential_response: phished.get(requested.data.webauthn.credential_options) },
  })
  assert.equal(refused.error?.code, 'mfa_verification_failed')
  const answer = key.get(requested.data.webauthn.credential_options)
  const signedIn = await other.auth.mfa.verify({
    factorId,
    challengeId: requested.data.id,
    webauthn: { type: 'request', ...webauthn, credential_response: answer },
  })
  assert.equal(signedIn.error, null)
  assert.equal((await other.auth.mfa.getAuthenticatorAssuranceLevel()).data.currentLevel, 'aal2')
  // An answer counts once.
  const replayed = await other.auth.mfa.verify({
    factorId,
    challengeId: requested.data.id,
    webauthn: { type: 'request', ...webauthn, credential_response: answer },
  })
  assert.equal(replayed.error?.code, 'mfa_factor_not_found')
  assert.equal((await other.auth.mfa.unenroll({ factorId })).error, null)
})

test('passkeys: registered by a signed-in user, then signing in alone', async () => {
  const owner = client()
  const email = address('lou')
  await owner.auth.signUp({ email, password: 'secret-lou' })
  const { data: confirmed } = await owner.auth.verifyOtp({ email, token: codeIn(await mailTo(email)), type: 'signup' })
  const key = new Authenticator('http://app.test')

  const started = await owner.auth.passkey.startRegistration()
  assert.equal(started.error, null)
  assert.deepEqual([started.data.options.rp.id, started.data.options.authenticatorSelection.residentKey], ['app.test', 'required'])
  const registered = await owner.auth.passkey.verifyRegistration({
    challengeId: started.data.challenge_id,
    credential: key.createJSON(started.data.options),
  })
  assert.equal(registered.error, null)
  const passkeyId = registered.data.id
  const renamed = await owner.auth.passkey.update({ passkeyId, friendlyName: 'laptop' })
  assert.deepEqual([renamed.error, renamed.data.friendly_name], [null, 'laptop'])

  // On another device: no address, no password, the key alone.
  const visitor = client()
  const options = await visitor.auth.passkey.startAuthentication()
  assert.equal(options.error, null)
  assert.deepEqual(options.data.options.allowCredentials ?? [], [])
  const assertion = key.getJSON(options.data.options)
  const { data, error } = await visitor.auth.passkey.verifyAuthentication({
    challengeId: options.data.challenge_id,
    credential: assertion,
  })
  assert.equal(error, null)
  assert.equal(data.user.id, confirmed.user.id)
  const claims = JSON.parse(Buffer.from(data.session.access_token.split('.')[1], 'base64url'))
  assert.equal(claims.amr[0].method, 'passkey')
  // The same answer again: the ceremony is used up.
  const replayed = await visitor.auth.passkey.verifyAuthentication({
    challengeId: options.data.challenge_id,
    credential: assertion,
  })
  assert.equal(replayed.error?.code, 'webauthn_challenge_not_found')

  const listed = await owner.auth.passkey.list()
  assert.deepEqual(listed.data.map((p) => [p.id, p.friendly_name, typeof p.last_used_at]), [[passkeyId, 'laptop', 'string']])
  assert.equal((await owner.auth.passkey.delete({ passkeyId })).error, null)
  const again = await visitor.auth.passkey.startAuthentication()
  const refused = await visitor.auth.passkey.verifyAuthentication({
    challengeId: again.data.challenge_id,
    credential: key.getJSON(again.data.options),
  })
  assert.equal(refused.error?.code, 'webauthn_verification_failed')
})

test('sign up with PKCE, as server-rendered apps (@supabase/ssr) do', async () => {
  const supabase = createClient(url, anonKey, { ...options, auth: { ...options.auth, flowType: 'pkce' } })
  const email = address('fay')
  const signed = await supabase.auth.signUp({
    email,
    password: 'secret-fay',
    options: { emailRedirectTo: 'http://localhost:5173/auth/callback' },
  })
  assert.equal(signed.error, null)
  const link = new URL(tokenLinkIn(await mailTo(email)))
  const followed = await fetch(url + link.pathname + link.search, { redirect: 'manual' })
  assert.equal(followed.status, 303)
  const back = new URL(followed.headers.get('location'))
  assert.equal(back.origin + back.pathname, 'http://localhost:5173/auth/callback')
  const { data, error } = await supabase.auth.exchangeCodeForSession(back.searchParams.get('code'))
  assert.equal(error, null)
  assert.equal(data.user.email, email)
  assert.ok(data.session.refresh_token)
})

test('claims verified against the published keys (getClaims)', async () => {
  const supabase = client()
  const email = address('gil')
  await supabase.auth.signUp({ email, password: 'secret-gil' })
  await supabase.auth.verifyOtp({ email, token: codeIn(await mailTo(email)), type: 'signup' })
  const { data, error } = await supabase.auth.getClaims()
  assert.equal(error, null)
  assert.equal(data.header.alg, 'ES256')
  assert.equal(data.claims.email, email)
  const jwks = await (await fetch(`${url}/auth/v1/.well-known/jwks.json`)).json()
  assert.equal(jwks.keys[0].kid, data.header.kid)
})

test('rowgate as an OAuth server: an application signs its user in, the user sees and revokes the grant', async () => {
  // The administrator registers the application (a public client: PKCE alone proves it).
  const { data: app, error: made } = await admin().auth.admin.oauth.createClient({
    client_name: `Notes CLI ${run}`,
    redirect_uris: ['http://localhost:8765/callback'],
    client_type: 'public',
  })
  assert.equal(made, null)
  const email = address('oak')
  await admin().auth.admin.createUser({ email, password: 'secret-oak', email_confirm: true })
  const supabase = client()
  await supabase.auth.signInWithPassword({ email, password: 'secret-oak' })

  // The application sends the browser to rowgate, which sends it on to the site's consent page.
  const verifier = crypto.randomBytes(32).toString('base64url')
  const challenge = crypto.createHash('sha256').update(verifier).digest('base64url')
  const authorize = new URL(`${url}/auth/v1/oauth/authorize`)
  for (const [k, v] of Object.entries({
    client_id: app.client_id, redirect_uri: 'http://localhost:8765/callback', response_type: 'code',
    scope: 'openid email profile', state: 'st-1', code_challenge: challenge, code_challenge_method: 'S256',
  })) authorize.searchParams.set(k, v)
  const toConsent = await fetch(authorize, { redirect: 'manual' })
  assert.equal(toConsent.status, 302)
  const consentPage = new URL(toConsent.headers.get('location'))
  assert.equal(consentPage.origin + consentPage.pathname, 'http://app.test/oauth/consent')
  const authorizationId = consentPage.searchParams.get('authorization_id')

  // The consent page, as Supabase's documentation writes it.
  const { data: details, error: unread } = await supabase.auth.oauth.getAuthorizationDetails(authorizationId)
  assert.equal(unread, null)
  assert.equal(details.client.name, `Notes CLI ${run}`)
  assert.equal(details.scope, 'openid email profile')
  const { data: approved, error: refused } = await supabase.auth.oauth.approveAuthorization(authorizationId)
  assert.equal(refused, null)
  const back = new URL(approved.redirect_url)
  assert.equal(back.searchParams.get('state'), 'st-1')

  // The application exchanges the code for its own tokens; with a key pair and `openid`, an ID token.
  const exchanged = await fetch(`${url}/auth/v1/oauth/token`, {
    method: 'POST',
    body: new URLSearchParams({
      grant_type: 'authorization_code', code: back.searchParams.get('code'), code_verifier: verifier,
      redirect_uri: 'http://localhost:8765/callback', client_id: app.client_id,
    }),
  })
  const tokens = await exchanged.json()
  assert.equal(exchanged.status, 200, JSON.stringify(tokens))
  const claims = JSON.parse(Buffer.from(tokens.access_token.split('.')[1], 'base64url'))
  assert.deepEqual([claims.client_id, claims.scope, claims.email], [app.client_id, 'openid email profile', email])
  const idClaims = JSON.parse(Buffer.from(tokens.id_token.split('.')[1], 'base64url'))
  assert.deepEqual([idClaims.aud, idClaims.email, idClaims.email_verified], [app.client_id, email, true])

  // The user sees the grant, and revokes it: the application's refresh token stops working.
  const { data: grants } = await supabase.auth.oauth.listGrants()
  assert.deepEqual(grants.map((g) => [g.client.id, g.scopes]), [[app.client_id, ['openid', 'email', 'profile']]])
  const { error: notRevoked } = await supabase.auth.oauth.revokeGrant({ clientId: app.client_id })
  assert.equal(notRevoked, null)
  const refreshed = await fetch(`${url}/auth/v1/oauth/token`, {
    method: 'POST',
    body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: app.client_id }),
  })
  assert.deepEqual([refreshed.status, (await refreshed.json()).error], [400, 'invalid_grant'])
  assert.deepEqual((await supabase.auth.oauth.listGrants()).data, [])
})

test('a phone number: sign up with a password, confirm with the code texted, sign in by code', async () => {
  // The server's test numbers: 15550001111 (code 123456) and 15550002222 (654321).
  const supabase = client()
  const signed = await supabase.auth.signUp({ phone: '+1 555 000 1111', password: `secret-${run}` })
  assert.equal(signed.error, null)
  assert.equal(signed.data.session, null)
  assert.equal(signed.data.user.phone, '15550001111')
  const { data: confirmed, error: unconfirmed } = await supabase.auth.verifyOtp({
    phone: '+15550001111', token: '123456', type: 'sms',
  })
  assert.equal(unconfirmed, null)
  assert.ok(confirmed.user.phone_confirmed_at)
  const { data: again, error: refused } = await client().auth.signInWithPassword({
    phone: '+15550001111', password: `secret-${run}`,
  })
  assert.equal(refused, null)
  assert.equal(again.user.id, confirmed.user.id)

  const other = client()
  const { error: notSent } = await other.auth.signInWithOtp({ phone: '+15550002222' })
  assert.equal(notSent, null)
  const { data: byCode, error: wrong } = await other.auth.verifyOtp({ phone: '+15550002222', token: '654321', type: 'sms' })
  assert.equal(wrong, null)
  assert.equal(byCode.session.user.phone, '15550002222')
})
