// The checks of scripts/topology that need a client: realtime with the real supabase-js client
// (the `ws` transport on Node 20) and with PocketBase's SDK (server-sent events) on two
// instances, and a steady load through the load balancer during a rolling restart.
//
//   node tests/js/topology.mjs realtime A_URL B_URL FRONT_URL
//   node tests/js/topology.mjs pocketbase A_URL B_URL FRONT_URL
//   node tests/js/topology.mjs load FRONT_URL SECONDS     (prints a JSON summary; exit 1 on any failure)
//
// ROWGATE_JWT_SECRET signs the anon key.
import crypto from 'node:crypto'
import WebSocket from 'ws'
import { createClient } from '@supabase/supabase-js'
import PocketBase from 'pocketbase'
import { EventSource } from 'eventsource'
import { jwt } from './jwt.mjs'

// PocketBase's SDK subscribes through the browser's EventSource, which Node 20 lacks.
globalThis.EventSource = EventSource

const [mode, ...args] = process.argv.slice(2)
const anonKey = jwt({ role: 'anon', exp: Math.floor(Date.now() / 1000) + 3600 })

async function realtime(a, b, front) {
  const tag = crypto.randomBytes(4).toString('hex')
  const seen = { a: [], b: [] }
  const clients = []
  for (const [name, url] of [['a', a], ['b', b]]) {
    const c = createClient(url, anonKey, { realtime: { transport: WebSocket, heartbeatIntervalMs: 1000 } })
    clients.push(c)
    await new Promise((resolve, reject) =>
      c
        .channel(`notes-${name}-${tag}`)
        .on('postgres_changes', { event: 'INSERT', schema: 'public', table: 'notes' }, (p) => seen[name].push(p.new.body))
        .subscribe((status, err) => {
          if (status === 'SUBSCRIBED') resolve()
          else if (status !== 'CLOSED') reject(new Error(`${name}: ${status} ${err?.message ?? ''}`))
        }),
    )
  }
  const body = `through the load balancer ${tag}`
  const written = await fetch(`${front}/rest/v1/notes`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', apikey: anonKey },
    body: JSON.stringify({ body }),
  })
  if (written.status !== 201) throw new Error(`the write answered ${written.status}: ${await written.text()}`)
  const end = Date.now() + 10000
  while (Date.now() < end && !(seen.a.includes(body) && seen.b.includes(body))) {
    await new Promise((r) => setTimeout(r, 20))
  }
  for (const c of clients) await c.removeAllChannels()
  if (!seen.a.includes(body) || !seen.b.includes(body)) {
    throw new Error(`subscribers got a: ${JSON.stringify(seen.a)}, b: ${JSON.stringify(seen.b)}`)
  }
  console.log('topology: realtime: subscribers on a and on b each got the insert made through HAProxy')
}

async function pocketbase(a, b, front) {
  const tag = crypto.randomBytes(4).toString('hex')
  const seen = { a: [], b: [] }
  const subscribers = []
  for (const [name, url] of [['a', a], ['b', b]]) {
    // Each stream and its subscriptions on one instance, as a sticky session keeps them.
    const pb = new PocketBase(url)
    pb.autoCancellation(false)
    await pb.collection('notes').subscribe('*', (e) => seen[name].push(`${e.action} ${e.record.body}`))
    subscribers.push(pb)
  }
  const body = `through the load balancer ${tag}`
  await new PocketBase(front).collection('notes').create({ body })
  const end = Date.now() + 10000
  const want = `create ${body}`
  while (Date.now() < end && !(seen.a.includes(want) && seen.b.includes(want))) {
    await new Promise((r) => setTimeout(r, 20))
  }
  for (const pb of subscribers) await pb.realtime.unsubscribe()
  if (!seen.a.includes(want) || !seen.b.includes(want)) {
    throw new Error(`PocketBase's subscribers got a: ${JSON.stringify(seen.a)}, b: ${JSON.stringify(seen.b)}`)
  }
  console.log("topology: realtime: PocketBase's subscribers on a and on b each got the record made through HAProxy")
}

async function load(front, seconds) {
  const end = Date.now() + seconds * 1000
  const statuses = {}
  const failures = []
  let sent = 0
  const worker = async (n) => {
    for (let i = 0; Date.now() < end; i++) {
      const write = (i + n) % 2 === 0
      // Reads of a cached route (misses read on the primary) and of a function (on the replica).
      const read = (i + n) % 4 === 1 ? `${front}/notes?select=id&order=id.desc&limit=5` : `${front}/rpc/in_recovery`
      const request = write
        ? fetch(`${front}/notes`, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json', Prefer: 'return=minimal' },
            body: JSON.stringify({ body: `load ${n}-${i}` }),
          })
        : fetch(read)
      sent++
      try {
        const r = await request
        await r.arrayBuffer()
        statuses[r.status] = (statuses[r.status] ?? 0) + 1
        if (r.status !== (write ? 201 : 200) && failures.length < 10) failures.push(`${write ? 'POST' : 'GET'} ${r.status}`)
      } catch (e) {
        statuses.error = (statuses.error ?? 0) + 1
        if (failures.length < 10) failures.push(`${write ? 'POST' : 'GET'} ${e.cause?.code ?? e.message}`)
      }
    }
  }
  await Promise.all(Array.from({ length: 8 }, (_, n) => worker(n)))
  const failed = sent - (statuses[200] ?? 0) - (statuses[201] ?? 0)
  console.log(JSON.stringify({ sent, statuses, failed, failures }))
  if (failed > 0) process.exit(1)
}

if (mode === 'realtime') await realtime(...args)
else if (mode === 'pocketbase') await pocketbase(...args)
else if (mode === 'load') await load(args[0], Number(args[1]))
else {
  console.error('usage: node tests/js/topology.mjs realtime|pocketbase A B FRONT | load FRONT SECONDS')
  process.exit(2)
}
process.exit(0)
