// A real OpenID provider (oidc-provider, with its development login and consent pages) for the
// tests of rowgate's /auth/v1/authorize?provider=NAME. Any login name signs in; the name is the
// subject, and `unverified-…` names get email_verified false.
//
//   OIDC_PORT=… OIDC_CLIENT_ID=… OIDC_CLIENT_SECRET=… OIDC_REDIRECT_URIS=a,b node tests/js/oidc_provider.mjs
//
// Listens on 127.0.0.1:OIDC_PORT with issuer http://127.0.0.1:OIDC_PORT, prints one line `ready`
// on stdout once listening, and exits when stdin closes (so it dies with the test that spawned it
// with a piped stdin) or on SIGTERM. Everything else goes to stderr.
import http from 'node:http'
import Provider from 'oidc-provider'

// oidc-provider prints its development notices with console.info; stdout carries only `ready`.
console.info = console.log = (...args) => console.error(...args)

const env = (name) => {
  const value = process.env[name]
  if (!value) {
    console.error(`oidc_provider: ${name} is not set`)
    process.exit(2)
  }
  return value
}
const port = Number(env('OIDC_PORT'))
const issuer = `http://127.0.0.1:${port}`

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: env('OIDC_CLIENT_ID'),
      client_secret: env('OIDC_CLIENT_SECRET'),
      token_endpoint_auth_method: 'client_secret_basic',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      redirect_uris: env('OIDC_REDIRECT_URIS').split(',').map((uri) => uri.trim()).filter(Boolean),
    },
  ],
  scopes: ['openid', 'offline_access', 'email', 'profile'],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'picture', 'preferred_username'],
  },
  // The client under test reads the profile from the ID token, as from Google's.
  conformIdTokenClaims: false,
  async findAccount(ctx, id) {
    return {
      accountId: id,
      async claims() {
        return {
          sub: id,
          email: id.includes('@') ? id : `${id}@example.com`,
          email_verified: !id.startsWith('unverified-'),
          name: `User ${id}`,
          picture: `https://example.com/${encodeURIComponent(id)}.png`,
          preferred_username: id,
        }
      },
    }
  },
  cookies: { keys: ['rowgate-test-cookie-key-1', 'rowgate-test-cookie-key-2'] },
  // Fixed values rather than the default functions, which print a notice when first called.
  ttl: {
    AccessToken: 3600,
    AuthorizationCode: 60,
    Grant: 3600,
    IdToken: 3600,
    Interaction: 600,
    RefreshToken: 86400,
    Session: 3600,
  },
})

// A failed request shows why on stderr, where the test's output collects it.
provider.on('server_error', (ctx, err) => console.error('oidc_provider server_error:', err))

const server = http.createServer(provider.callback())
server.on('error', (err) => {
  console.error('oidc_provider:', err)
  process.exit(1)
})
server.listen(port, '127.0.0.1', () => process.stdout.write('ready\n'))

// The parent's end of the pipe closes when it exits, however it exits.
process.stdin.on('end', () => process.exit(0))
process.stdin.on('close', () => process.exit(0))
process.stdin.resume()
process.on('SIGTERM', () => process.exit(0))
