// A WebAuthn authenticator in software, for tests: what `navigator.credentials.create()` and
// `.get()` give a page, made with Node's crypto. ES256 keys, `none` attestation, a signature
// counter, discoverable credentials (each keeps its user's handle); it answers for whatever
// `origin` it is told the page has. `createJSON` and `getJSON` take and give the JSON forms
// (base64url for bytes) that passkey APIs exchange.
import crypto from 'node:crypto'

const b64url = (bytes) => Buffer.from(bytes).toString('base64url')
const sha256 = (data) => crypto.createHash('sha256').update(data).digest()
const buffer = (bytes) => Uint8Array.from(bytes).buffer

// CBOR (RFC 8949) of the few kinds an attestation needs: integers, text, bytes and maps.
function cbor(value) {
  const head = (major, n) => {
    if (n < 24) return Buffer.from([(major << 5) | n])
    if (n < 256) return Buffer.from([(major << 5) | 24, n])
    const b = Buffer.alloc(3)
    b[0] = (major << 5) | 25
    b.writeUInt16BE(n, 1)
    return b
  }
  if (typeof value === 'number') return value >= 0 ? head(0, value) : head(1, -1 - value)
  if (typeof value === 'string') return Buffer.concat([head(3, Buffer.byteLength(value)), Buffer.from(value)])
  if (value instanceof Uint8Array) return Buffer.concat([head(2, value.length), value])
  const entries = value instanceof Map ? [...value] : Object.entries(value)
  return Buffer.concat([head(5, entries.length), ...entries.flatMap(([k, v]) => [cbor(k), cbor(v)])])
}

export class Authenticator {
  constructor(origin) {
    this.origin = origin
    this.credentials = new Map() // id (base64url) -> { privateKey, counter, userHandle }
  }

  // navigator.credentials.create({ publicKey }) with the options auth-js deserialized.
  create({ publicKey }) {
    const { privateKey, publicKey: key } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' })
    const jwk = key.export({ format: 'jwk' })
    const id = crypto.randomBytes(16)
    this.credentials.set(b64url(id), { privateKey, counter: 0, userHandle: new Uint8Array(publicKey.user.id) })
    const coseKey = cbor(
      new Map([
        [1, 2], // kty: EC2
        [3, -7], // alg: ES256
        [-1, 1], // crv: P-256
        [-2, Buffer.from(jwk.x, 'base64url')],
        [-3, Buffer.from(jwk.y, 'base64url')],
      ]),
    )
    const length = Buffer.alloc(2)
    length.writeUInt16BE(id.length)
    const authData = Buffer.concat([
      sha256(publicKey.rp.id),
      Buffer.from([0x45]), // user present, user verified, attested credential data
      Buffer.alloc(4), // signature counter
      Buffer.alloc(16), // AAGUID
      length,
      id,
      coseKey,
    ])
    const clientDataJSON = this.clientData('webauthn.create', publicKey.challenge)
    const attestationObject = cbor({ fmt: 'none', attStmt: {}, authData })
    return {
      id: b64url(id),
      rawId: buffer(id),
      type: 'public-key',
      authenticatorAttachment: 'cross-platform',
      response: { attestationObject: buffer(attestationObject), clientDataJSON: buffer(clientDataJSON) },
      getClientExtensionResults: () => ({}),
    }
  }

  // navigator.credentials.get({ publicKey }): an assertion by one of the allowed credentials.
  get({ publicKey }) {
    const allowed = (publicKey.allowCredentials || []).map((c) => b64url(new Uint8Array(c.id)))
    // No list: a discoverable credential's sign-in, which the last one made answers.
    const id = allowed.length ? allowed.find((a) => this.credentials.has(a)) : [...this.credentials.keys()].pop()
    if (!id) throw new Error('no credential of this authenticator is allowed')
    const credential = this.credentials.get(id)
    credential.counter += 1
    const counter = Buffer.alloc(4)
    counter.writeUInt32BE(credential.counter)
    const authData = Buffer.concat([sha256(publicKey.rpId), Buffer.from([0x05]), counter])
    const clientDataJSON = this.clientData('webauthn.get', publicKey.challenge)
    const signature = crypto.sign('sha256', Buffer.concat([authData, sha256(clientDataJSON)]), credential.privateKey)
    return {
      id,
      rawId: buffer(Buffer.from(id, 'base64url')),
      type: 'public-key',
      authenticatorAttachment: 'cross-platform',
      response: {
        authenticatorData: buffer(authData),
        clientDataJSON: buffer(clientDataJSON),
        signature: buffer(signature),
        userHandle: buffer(credential.userHandle),
      },
      getClientExtensionResults: () => ({}),
    }
  }

  createJSON(options) {
    const publicKey = { ...options, challenge: bytes(options.challenge), user: { ...options.user, id: bytes(options.user.id) } }
    return json(this.create({ publicKey }))
  }

  getJSON(options) {
    const allowCredentials = (options.allowCredentials || []).map((c) => ({ ...c, id: bytes(c.id) }))
    return json(this.get({ publicKey: { ...options, challenge: bytes(options.challenge), allowCredentials } }))
  }

  clientData(type, challenge) {
    return Buffer.from(
      JSON.stringify({ type, challenge: b64url(new Uint8Array(challenge)), origin: this.origin, crossOrigin: false }),
    )
  }
}

const bytes = (text) => buffer(Buffer.from(text, 'base64url'))

// A credential as its JSON form (PublicKeyCredential.toJSON()).
function json(credential) {
  const response = Object.fromEntries(
    Object.entries(credential.response).map(([k, v]) => [k, v instanceof ArrayBuffer ? b64url(new Uint8Array(v)) : v]),
  )
  const { id, type, authenticatorAttachment } = credential
  return { id, rawId: id, type, authenticatorAttachment, response, clientExtensionResults: {} }
}
