// WebAuthn through supabase-js in a real browser: Debian's chromium (driven by puppeteer-core)
// with Chrome's virtual authenticator — a USB security key that keeps passkeys too, since
// supabase-js asks for a cross-platform key for second factors — on a page of ROWGATE_URL
// (http://localhost:PORT, the relying party's origin). A user signs up, registers a security
// key as a second factor and a passkey, then on a second client signs in with the passkey alone
// and raises that session to aal2 with the key — the calls docs/auth.md shows, as written
// there. Prints what it saw as one JSON line.
import { launchChromium } from './chromium.mjs'
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const base = process.env.ROWGATE_URL
const anonKey = process.env.ANON_KEY
const browser = await launchChromium()
try {
  const page = await browser.newPage()
  const cdp = await page.createCDPSession()
  await cdp.send('WebAuthn.enable')
  await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: {
      protocol: 'ctap2',
      transport: 'usb',
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
      automaticPresenceSimulation: true,
    },
  })
  await page.goto(`${base}/ready`)
  await page.addScriptTag({ path: require.resolve('@supabase/supabase-js/dist/umd/supabase.js') })
  const seen = await page.evaluate(
    async ({ base, anonKey }) => {
      const options = { auth: { persistSession: false, autoRefreshToken: false, detectSessionInUrl: false } }
      const claims = (session) => JSON.parse(atob(session.access_token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/')))
      const supabase = window.supabase.createClient(base, anonKey, options)
      const signedUp = await supabase.auth.signUp({ email: 'browser@example.com', password: 'secret-browser' })
      if (signedUp.error) return { step: 'sign-up', error: signedUp.error.message }

      // docs/auth.md, "A second factor": a page of the relying party's origin enrolls a key.
      const { data, error } = await supabase.auth.mfa.webauthn.register({ friendlyName: 'YubiKey' })
      if (error) return { step: 'key registered', error: error.message }
      const keyed = claims(data)

      // docs/auth.md, "Passkeys": registration (the session is at aal2 now, as it must be).
      const { data: started } = await supabase.auth.passkey.startRegistration()
      const created = await navigator.credentials.create({
        publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(started.options),
      })
      const registered = await supabase.auth.passkey.verifyRegistration({
        challengeId: started.challenge_id,
        credential: created.toJSON(),
      })
      if (registered.error) return { step: 'passkey registered', error: registered.error.message }

      // Later, signed out: the passkey alone.
      const later = window.supabase.createClient(base, anonKey, options)
      const { data: begun } = await later.auth.passkey.startAuthentication()
      const asserted = await navigator.credentials.get({
        publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(begun.options),
      })
      const signedIn = await later.auth.passkey.verifyAuthentication({
        challengeId: begun.challenge_id,
        credential: asserted.toJSON(),
      })
      if (signedIn.error) return { step: 'passkey sign-in', error: signedIn.error.message }
      const byPasskey = claims(signedIn.data.session)

      // docs/auth.md, "A second factor": from that aal1 session, the key raises it to aal2.
      const { data: factors } = await later.auth.mfa.listFactors()
      const raised = await later.auth.mfa.webauthn.authenticate({ factorId: factors.webauthn[0].id })
      if (raised.error) return { step: 'key authentication', error: raised.error.message }
      const level = await later.auth.mfa.getAuthenticatorAssuranceLevel()
      return {
        key: [keyed.aal, keyed.amr[0].method],
        passkey: [byPasskey.aal, byPasskey.amr[0].method, signedIn.data.user.email],
        raised: [level.data.currentLevel, claims(raised.data).amr.map((a) => a.method)],
      }
    },
    { base, anonKey },
  )
  console.log(JSON.stringify(seen))
} finally {
  await browser.close()
}
