// A mixed workload of many users at once through the real supabase-js client (scripts/soak
// runs it against rowgate on each backend): each user signs up, subscribes to its todos'
// changes, then for SOAK_SECONDS picks at random among REST inserts, reads, updates and
// deletes under row-level security (or the access rules), uploads, downloads and transforms
// of its own objects, reads of another user's rows and objects (which must find nothing),
// session refreshes and logins. At the end the service role checks every acknowledged write
// and object. Prints one JSON line of figures; any 5xx, lost write or object, or row, object or
// change seen by the wrong user is listed in it under `failures`.
import crypto from 'node:crypto'
import zlib from 'node:zlib'
import WebSocket from 'ws'
import { createClient } from '@supabase/supabase-js'
import { jwt } from './jwt.mjs'

const url = process.env.ROWGATE_URL
const users = Number(process.env.SOAK_USERS || 20)
const seconds = Number(process.env.SOAK_SECONDS || 30)
const run = process.env.SOAK_RUN || crypto.randomBytes(3).toString('hex')
const bucket = process.env.SOAK_BUCKET || 'soak'
// What each user does, picked at random (SOAK_OPS narrows it, to tell what costs what).
const choices = (process.env.SOAK_OPS || 'insert,insert,read,update,delete,upload,download,transform,peek,peek object,refresh,login').split(',')

const hour = () => Math.floor(Date.now() / 1000) + 3600
const anonKey = jwt({ role: 'anon', exp: hour() })
const service = createClient(url, jwt({ role: 'service_role', exp: hour() }), {
  auth: { persistSession: false, autoRefreshToken: false },
  realtime: { transport: WebSocket },
})

const counts = {}
const failures = []
const count = (what) => { counts[what] = (counts[what] || 0) + 1 }
const failed = (what) => { if (failures.length < 50) failures.push(what); count('failure') }
const pause = (ms) => new Promise((r) => setTimeout(r, ms))
const pick = (a) => a[Math.floor(Math.random() * a.length)]

/** Records an operation's outcome: a 5xx or a network failure is a failure, a 4xx is counted. */
function outcome(op, { error, status }) {
  const code = Number(error?.status ?? error?.statusCode ?? status ?? 0)
  if (!error) return count(op), true
  if (code >= 500 || code === 0) failed(`${op}: ${code} ${error.message ?? JSON.stringify(error)}`)
  else count(`${op} ${code}`)
  return false
}

/** A PNG of `side` x `side` grey pixels, for transforms. */
function png(side) {
  const chunk = (kind, data) => {
    const len = Buffer.alloc(4)
    len.writeUInt32BE(data.length)
    const crc = Buffer.alloc(4)
    crc.writeUInt32BE(zlib.crc32(Buffer.concat([Buffer.from(kind), data])))
    return Buffer.concat([len, Buffer.from(kind), data, crc])
  }
  const ihdr = Buffer.alloc(13)
  ihdr.writeUInt32BE(side, 0)
  ihdr.writeUInt32BE(side, 4)
  ihdr.set([8, 0, 0, 0, 0], 8)
  const row = Buffer.concat([Buffer.from([0]), Buffer.alloc(side, 0x80)])
  const pixels = zlib.deflateSync(Buffer.concat(Array(side).fill(row)))
  return Buffer.concat([Buffer.from('\x89PNG\r\n\x1a\n', 'latin1'), chunk('IHDR', ihdr), chunk('IDAT', pixels), chunk('IEND', Buffer.alloc(0))])
}

class User {
  constructor(n) {
    this.email = `soak-${run}-${n}@example.com`
    this.password = `password-${n}-${run}`
    this.client = createClient(url, anonKey, {
      auth: { persistSession: false, autoRefreshToken: false, detectSessionInUrl: false },
      realtime: { transport: WebSocket },
    })
    this.todos = new Map() // id -> title, as this user last wrote it
    this.objects = new Map() // path -> content
    this.seen = new Set() // todo ids whose INSERT this user's subscription delivered
    this.inserted = [] // ids inserted once the subscription was up
  }

  async start() {
    const { data, error } = await this.client.auth.signUp({ email: this.email, password: this.password })
    if (!outcome('sign-up', { error })) throw new Error(`sign-up failed: ${error?.message}`)
    this.id = data.user.id
    await this.client.realtime.setAuth()
    await new Promise((resolve, reject) => {
      this.channel = this.client
        .channel(`todos-${this.id}`)
        .on('postgres_changes', { event: '*', schema: 'public', table: 'todos' }, (m) => this.changed(m))
        .subscribe((status, err) => {
          if (status === 'SUBSCRIBED') resolve()
          else if (status === 'CHANNEL_ERROR' || status === 'TIMED_OUT') reject(new Error(`${status}: ${err?.message}`))
        })
    })
    count('subscribe')
    const { error: e } = await this.client.storage.from(bucket).upload(`${this.id}/picture.png`, png(600), { contentType: 'image/png' })
    outcome('upload picture', { error: e })
  }

  changed(m) {
    count(`change ${m.eventType}`)
    const row = m.new && Object.keys(m.new).length ? m.new : null
    // Only the key of a deleted row reaches every reader of the table (as Supabase's); any
    // other change must be this user's own.
    if (row && row.owner !== this.id) failed(`user ${this.id} received a change of ${row.owner}'s row ${row.id}`)
    if (m.eventType === 'INSERT' && row) this.seen.add(row.id)
  }

  async step(others) {
    const op = pick(choices)
    const c = this.client
    switch (op) {
      case 'insert': {
        const title = crypto.randomBytes(6).toString('hex')
        const r = await c.from('todos').insert({ owner: this.id, title }).select('id').single()
        if (outcome(op, r)) {
          this.todos.set(r.data.id, title)
          this.inserted.push(r.data.id)
        }
        break
      }
      case 'read': {
        const r = await c.from('todos').select('id, owner, title')
        if (!outcome(op, r)) break
        for (const row of r.data) if (row.owner !== this.id) failed(`user ${this.id} read ${row.owner}'s row ${row.id}`)
        const ids = new Set(r.data.map((row) => row.id))
        for (const id of this.todos.keys()) if (!ids.has(id)) failed(`user ${this.id}'s row ${id} is missing from its read`)
        break
      }
      case 'update': {
        const id = pick([...this.todos.keys()])
        if (id === undefined) break
        const title = crypto.randomBytes(6).toString('hex')
        const r = await c.from('todos').update({ title }).eq('id', id).select('id')
        if (outcome(op, r)) {
          if (r.data.length !== 1) failed(`user ${this.id}'s update of its row ${id} touched ${r.data.length}`)
          this.todos.set(id, title)
        }
        break
      }
      case 'delete': {
        const id = pick([...this.todos.keys()])
        if (id === undefined) break
        const r = await c.from('todos').delete().eq('id', id)
        if (outcome(op, r)) this.todos.delete(id)
        break
      }
      case 'upload': {
        const path = `${this.id}/${crypto.randomBytes(4).toString('hex')}.txt`
        const content = crypto.randomBytes(Math.floor(Math.random() * 20_000)).toString('base64')
        const r = await c.storage.from(bucket).upload(path, content, { contentType: 'text/plain' })
        if (outcome(op, r)) this.objects.set(path, content)
        break
      }
      case 'download': {
        const path = pick([...this.objects.keys()])
        if (path === undefined) break
        const r = await c.storage.from(bucket).download(path)
        if (outcome(op, r) && (await r.data.text()) !== this.objects.get(path)) failed(`${path} came back changed`)
        break
      }
      case 'transform': {
        const width = 20 + Math.floor(Math.random() * 200)
        const r = await c.storage.from(bucket).download(`${this.id}/picture.png`, { transform: { width } })
        if (outcome(op, r) && r.data.size === 0) failed('a transform came back empty')
        break
      }
      case 'peek': {
        // Another user's rows, by their ids: row-level security (or the rules) shows none.
        const other = pick(others)
        const ids = [...other.todos.keys()].slice(0, 5)
        if (!ids.length) break
        const r = await c.from('todos').select('id').in('id', ids)
        if (outcome(op, r) && r.data.length) failed(`user ${this.id} read ${other.id}'s rows ${r.data.map((x) => x.id)}`)
        break
      }
      case 'peek object': {
        const other = pick(others)
        const path = pick([...other.objects.keys()])
        if (path === undefined) break
        const r = await c.storage.from(bucket).download(path)
        if (!r.error) failed(`user ${this.id} downloaded ${other.id}'s object ${path}`)
        else count('peek object refused')
        break
      }
      case 'refresh': {
        outcome(op, await c.auth.refreshSession())
        break
      }
      case 'login': {
        outcome(op, await c.auth.signInWithPassword({ email: this.email, password: this.password }))
        break
      }
    }
  }
}

const made = await service.storage.createBucket(bucket)
if (made.error && made.error.statusCode !== '409') throw new Error(`the bucket: ${made.error.message}`)
const all = Array.from({ length: users }, (_, n) => new User(n))
const started = Date.now()
for (let i = 0; i < all.length; i += 10) await Promise.all(all.slice(i, i + 10).map((u) => u.start()))
const end = Date.now() + seconds * 1000
await Promise.all(all.map(async (u) => {
  const others = all.filter((o) => o !== u)
  while (Date.now() < end) {
    try {
      await u.step(others)
    } catch (e) {
      failed(`user ${u.id}: ${e.message}`)
    }
  }
}))
await pause(2000) // the last changes' deliveries

// What was acknowledged is there, as its writer last wrote it, and nothing else of its owner.
for (const u of all) {
  const r = await service.from('todos').select('id, owner, title').eq('owner', u.id)
  if (!outcome('check rows', r)) continue
  const stored = new Map(r.data.map((row) => [row.id, row.title]))
  for (const [id, title] of u.todos) {
    if (stored.get(id) !== title) failed(`user ${u.id}'s row ${id}: acknowledged ${title}, stored ${stored.get(id)}`)
  }
  if (stored.size !== u.todos.size) failed(`user ${u.id} has ${stored.size} rows stored, ${u.todos.size} acknowledged`)
  for (const [path, content] of u.objects) {
    const d = await service.storage.from(bucket).download(path)
    if (!outcome('check objects', d) || (await d.data.text()) !== content) failed(`object ${path} lost or changed`)
  }
  // A row deleted before its insert's check could read it is not sent (the check reads the
  // row as it is then, as docs/realtime.md says): only a row still there must have come.
  const missed = u.inserted.filter((id) => !u.seen.has(id))
  const lost = missed.filter((id) => u.todos.has(id))
  counts['insert not sent, row deleted first'] = (counts['insert not sent, row deleted first'] || 0) + missed.length - lost.length
  if (lost.length) failed(`user ${u.id} never received the INSERT of its rows ${lost.slice(0, 5)} (${lost.length})`)
  await u.client.removeAllChannels()
}
const operations = Object.entries(counts).filter(([k]) => !k.startsWith('change') && !k.startsWith('check') && k !== 'failure').reduce((s, [, v]) => s + v, 0)
console.log(JSON.stringify({
  users, seconds, operations, per_second: Math.round(operations / ((Date.now() - started) / 1000)),
  rows: all.reduce((s, u) => s + u.todos.size, 0), objects: all.reduce((s, u) => s + u.objects.size, 0),
  changes: Object.entries(counts).filter(([k]) => k.startsWith('change')).reduce((s, [, v]) => s + v, 0),
  counts, failures,
}))
process.exit(0)
