// The real supabase-js client (its realtime client, with the `ws` transport on Node 20, and
// its REST client at /rest/v1) against rowgate's /realtime/v1. Run by tests/it/realtime.rs
// with ROWGATE_URL (a server whose `todos` rows each user reads only where owner = their
// `sub`, whose `notes` anyone reads) and ROWGATE_JWT_SECRET; REALTIME_VSN picks the serializer,
// ROWGATE_BACKEND (`sqlite`, `postgres`) says what a delete under a row rule carries.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import crypto from 'node:crypto'
import WebSocket from 'ws'
import { createClient } from '@supabase/supabase-js'
import { jwt } from './jwt.mjs'

const url = process.env.ROWGATE_URL
const vsn = process.env.REALTIME_VSN || '2.0.0'
// On SQLite a deleted row's rule is evaluated on its old values: the delete goes whole to who
// could read the row, to nobody else. On PostgreSQL its key goes to every reader, as Supabase's.
const sqlite = process.env.ROWGATE_BACKEND === 'sqlite'

const hour = () => Math.floor(Date.now() / 1000) + 3600
const anonKey = jwt({ role: 'anon', exp: hour() })
const service = jwt({ role: 'service_role', exp: hour() })
const user = (sub, exp = hour()) => jwt({ role: 'authenticated', sub, exp })

const clients = []
function client(token) {
  const c = createClient(url, anonKey, {
    realtime: { transport: WebSocket, vsn, heartbeatIntervalMs: 1000 },
    ...(token ? { accessToken: async () => token } : {}),
  })
  clients.push(c)
  return c
}

// Subscribes once the client has its token (the first join would otherwise go out with the
// apikey's claims, a race of realtime-js's own).
async function subscribed(c, channel) {
  await c.realtime.setAuth()
  await new Promise((resolve, reject) =>
    channel.subscribe((status, err) => {
      if (status === 'SUBSCRIBED') resolve()
      else if (status !== 'CLOSED') reject(new Error(`${status}: ${err?.message}`))
    }),
  )
  return channel
}

async function until(what, check, ms = 5000) {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (check()) return
    await new Promise((r) => setTimeout(r, 20))
  }
  assert.fail(`timed out waiting for ${what}`)
}

const pause = (ms) => new Promise((r) => setTimeout(r, ms))
const writer = () => client(service).from('todos')
const tag = () => crypto.randomBytes(4).toString('hex')

test.after(async () => {
  for (const c of clients) await c.removeAllChannels()
})

test('each user receives the changes of the rows they may read, in commit order', async () => {
  const t = tag()
  const seen = { alice: [], bob: [] }
  for (const who of ['alice', 'bob']) {
    const c = client(user(`${who}-${t}`))
    await subscribed(
      c,
      c.channel(`own-${who}-${t}`).on('postgres_changes', { event: '*', schema: 'public', table: 'todos' }, (p) =>
        seen[who].push(p),
      ),
    )
  }
  const w = writer()
  const { data: rows, error } = await w
    .insert([
      { title: `a1-${t}`, owner: `alice-${t}` },
      { title: `b1-${t}`, owner: `bob-${t}` },
      { title: `a2-${t}`, owner: `alice-${t}` },
    ])
    .select('id')
  assert.equal(error, null)
  const [a1, b1, a2] = rows.map((r) => r.id)
  // Other tests' deletes reach these subscribers too (a delete is told to every reader).
  const mine = (p) => [a1, b1, a2].includes(p.new.id ?? p.old.id)
  // Each write once the last has arrived: a row is sent as the subscriber reads it when its
  // change is checked, and these compare whole rows.
  await until('the inserts', () => seen.alice.filter(mine).length >= 2 && seen.bob.filter(mine).length >= 1)
  assert.equal((await w.update({ done: true }).eq('id', a1)).error, null)
  await until('the update', () => seen.alice.filter(mine).length >= 3)
  assert.equal((await w.delete().eq('id', a2)).error, null)
  await until('alice gets 4 changes', () => seen.alice.filter(mine).length >= 4)
  await until('bob gets his changes', () => seen.bob.filter(mine).length >= (sqlite ? 1 : 2))
  await pause(200)
  seen.alice = seen.alice.filter(mine)
  seen.bob = seen.bob.filter(mine)

  const summary = (p) => [p.eventType, p.new.id ?? p.old.id, p.new.title]
  assert.deepEqual(seen.alice.map(summary), [
    ['INSERT', a1, `a1-${t}`],
    ['INSERT', a2, `a2-${t}`],
    ['UPDATE', a1, `a1-${t}`],
    ['DELETE', a2, undefined],
  ])
  // A deleted row can no longer be read: like Supabase, every subscriber who may read the
  // table is told its key (on SQLite, only who could read the row).
  assert.deepEqual(seen.bob.map(summary), [['INSERT', b1, `b1-${t}`], ...(sqlite ? [] : [['DELETE', a2, undefined]])])
  const [insert, , update, del] = seen.alice
  assert.equal(insert.schema, 'public')
  assert.equal(insert.table, 'todos')
  assert.match(insert.commit_timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
  assert.equal(insert.errors, null)
  assert.deepEqual(insert.new, { id: a1, title: `a1-${t}`, owner: `alice-${t}`, done: false, tags: null, meta: null })
  assert.deepEqual(insert.old, {})
  assert.deepEqual(update.new.done, true)
  // With row-level decisions, an update's old row is its key only.
  assert.deepEqual(update.old, { id: a1 })
  assert.deepEqual(del.new, {})
  const whole = { id: a2, title: `a2-${t}`, owner: `alice-${t}`, done: false, tags: null, meta: null }
  assert.deepEqual(del.old, sqlite ? whole : { id: a2 })
})

test('filters pick the rows a binding receives; the join reply echoes bindings with ids', async () => {
  const t = tag()
  const me = `carol-${t}`
  const got = { eq: [], inlist: [], update: [] }
  const c = client(user(me))
  const ch = c
    .channel(`filters-${t}`)
    .on('postgres_changes', { event: 'INSERT', schema: 'public', table: 'todos', filter: `title=eq.x-${t}` }, (p) =>
      got.eq.push(p.new.title),
    )
    .on('postgres_changes', { event: 'INSERT', schema: 'public', table: 'todos', filter: `title=in.(y-${t},"z,${t}")` }, (p) =>
      got.inlist.push(p.new.title),
    )
    .on('postgres_changes', { event: 'UPDATE', schema: 'public', table: 'todos' }, (p) => got.update.push(p.new.title))
  await subscribed(c, ch)
  const w = writer()
  for (const title of [`x-${t}`, `y-${t}`, `z,${t}`, `w-${t}`]) {
    assert.equal((await w.insert({ title, owner: me })).error, null)
  }
  await w.update({ done: true }).eq('title', `w-${t}`)
  await until('all three bindings fire', () => got.eq.length && got.inlist.length === 2 && got.update.length)
  await pause(200)
  assert.deepEqual(got, { eq: [`x-${t}`], inlist: [`y-${t}`, `z,${t}`], update: [`w-${t}`] })
})

test('a new token changes what a channel receives', async () => {
  const t = tag()
  const got = []
  let token = user(`dave-${t}`)
  const c = createClient(url, anonKey, {
    realtime: { transport: WebSocket, vsn, heartbeatIntervalMs: 1000 },
    accessToken: async () => token,
  })
  clients.push(c)
  await subscribed(
    c,
    c.channel(`refresh-${t}`).on('postgres_changes', { event: 'INSERT', schema: 'public', table: 'todos' }, (p) =>
      got.push(p.new.title),
    ),
  )
  const w = writer()
  await w.insert({ title: `d1-${t}`, owner: `dave-${t}` })
  await until('dave sees his row', () => got.length === 1)
  token = user(`erin-${t}`)
  await c.realtime.setAuth()
  await pause(300)
  await w.insert([
    { title: `d2-${t}`, owner: `dave-${t}` },
    { title: `e1-${t}`, owner: `erin-${t}` },
  ])
  await until('erin sees her row', () => got.length === 2)
  await pause(200)
  assert.deepEqual(got, [`d1-${t}`, `e1-${t}`])
})

test('an expired token closes its channel with Supabase\'s message', async () => {
  const t = tag()
  const system = []
  const statuses = []
  const c = client(user(`fay-${t}`, Math.floor(Date.now() / 1000) + 2))
  const ch = c
    .channel(`expiry-${t}`)
    .on('system', {}, (p) => system.push(p))
    .on('postgres_changes', { event: '*', schema: 'public', table: 'todos' }, () => {})
  await c.realtime.setAuth()
  ch.subscribe((s) => statuses.push(s))
  await until('the channel closes', () => statuses.includes('CLOSED'), 8000)
  const expired = system.find((p) => p.extension === 'system')
  assert.equal(expired.status, 'error')
  assert.match(expired.message, /^Token has expired \d+ seconds ago$/)
})

test('a table without row-level rules sends whole rows, typed, to every reader', async () => {
  const t = tag()
  const got = []
  const c = client()
  await subscribed(
    c,
    c.channel(`notes-${t}`).on('postgres_changes', { event: '*', schema: 'public', table: 'notes' }, (p) => got.push(p)),
  )
  const notes = client(service).from('notes')
  const { data, error } = await notes.insert({ body: `n-${t}`, n: 7, tags: ['a', 'b'], meta: { k: [1, 2] } }).select('id')
  assert.equal(error, null)
  const id = data[0].id
  assert.equal((await notes.delete().eq('id', id)).error, null)
  // Other tests' notes reach this subscriber too.
  const mine = () => got.filter((p) => (p.new.id ?? p.old.id) === id)
  await until('insert and delete', () => mine().length === 2)
  const [insert, del] = mine()
  assert.deepEqual(insert.new, { id, body: `n-${t}`, n: 7, tags: ['a', 'b'], meta: { k: [1, 2] } })
  // No row-level decision: the deleted row goes out whole where the database keeps it.
  assert.equal(del.eventType, 'DELETE')
  assert.equal(del.old.id, id)
})

test('a rule that reads no claim decides once per role, and each user still gets only what it allows', async () => {
  const t = tag()
  const got = { gus: [], hal: [] }
  for (const who of ['gus', 'hal']) {
    const c = client(user(`${who}-${t}`))
    await subscribed(
      c,
      c.channel(`posts-${who}-${t}`).on('postgres_changes', { event: 'INSERT', schema: 'public', table: 'posts' }, (p) =>
        got[who].push(p.new.title),
      ),
    )
  }
  const posts = client(service).from('posts')
  assert.equal((await posts.insert([
    { title: `draft-${t}`, published: false },
    { title: `out-${t}`, published: true },
  ])).error, null)
  // Other tests' posts reach these subscribers too.
  const mine = (titles) => titles.filter((x) => x.endsWith(t))
  await until('both get the published post', () => mine(got.gus).length && mine(got.hal).length)
  await pause(200)
  assert.deepEqual({ gus: mine(got.gus), hal: mine(got.hal) }, { gus: [`out-${t}`], hal: [`out-${t}`] })
})

test('broadcast reaches the channel\'s members, the sender too with self, answered with ack', async () => {
  const t = tag()
  const got = { a: [], b: [] }
  const a = client()
  const b = client()
  const ca = await subscribed(
    a,
    a.channel(`room-${t}`, { config: { broadcast: { self: true, ack: true } } }).on('broadcast', { event: 'cursor' }, (p) =>
      got.a.push(p.payload),
    ),
  )
  await subscribed(b, b.channel(`room-${t}`).on('broadcast', { event: 'cursor' }, (p) => got.b.push(p.payload)))
  assert.equal(await ca.send({ type: 'broadcast', event: 'cursor', payload: { x: 1 } }), 'ok')
  assert.equal(await ca.send({ type: 'broadcast', event: 'other', payload: { x: 2 } }), 'ok')
  await until('both receive', () => got.a.length && got.b.length)
  await pause(100)
  assert.deepEqual(got, { a: [{ x: 1 }], b: [{ x: 1 }] })
  // Over HTTP, from a client that has not joined (realtime-js falls back to the REST endpoint).
  const r = await fetch(`${url}/realtime/v1/api/broadcast`, {
    method: 'POST',
    headers: { apikey: anonKey, 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ topic: `room-${t}`, event: 'cursor', payload: { x: 3 } }] }),
  })
  assert.equal(r.status, 202)
  await until('the REST broadcast arrives', () => got.b.length === 2)
  assert.deepEqual(got.b[1], { x: 3 })
})

test('presence: joins, the state, and leaves', async () => {
  const t = tag()
  const a = client()
  const b = client()
  const joins = []
  const leaves = []
  const ca = a
    .channel(`lobby-${t}`, { config: { presence: { key: 'ann' } } })
    .on('presence', { event: 'join' }, ({ key }) => joins.push(key))
    .on('presence', { event: 'leave' }, ({ key }) => leaves.push(key))
  await subscribed(a, ca)
  const cb = b.channel(`lobby-${t}`, { config: { presence: { key: 'ben' } } })
  await subscribed(b, cb)
  assert.equal(await ca.track({ mood: 'ok' }), 'ok')
  assert.equal(await cb.track({ mood: 'fine' }), 'ok')
  await until('both are present', () => Object.keys(ca.presenceState()).length === 2)
  assert.deepEqual(ca.presenceState().ben.map((p) => p.mood), ['fine'])
  await cb.untrack()
  await until('ben leaves', () => leaves.includes('ben'))
  assert.deepEqual(Object.keys(ca.presenceState()), ['ann'])
  assert.ok(joins.includes('ann') && joins.includes('ben'))
})
