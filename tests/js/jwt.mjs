// An HS256 token for `claims`, signed with ROWGATE_JWT_SECRET (the secret the tests' rowgate
// servers verify with).
import crypto from 'node:crypto'

export function jwt(claims, secret = process.env.ROWGATE_JWT_SECRET) {
  const enc = (o) => Buffer.from(JSON.stringify(o)).toString('base64url')
  const head = enc({ alg: 'HS256', typ: 'JWT' })
  const body = enc(claims)
  const sig = crypto.createHmac('sha256', secret).update(`${head}.${body}`).digest('base64url')
  return `${head}.${body}.${sig}`
}
