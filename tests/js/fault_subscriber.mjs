// A realtime subscriber for scripts/fault-soak: joins postgres_changes on one table as one user
// and prints one JSON line per event — a change (its row's id and owner), a `system` status of
// the change feed, a disconnection — with the time, reconnecting whenever the socket closes
// (a server killed and started again). Stops when stdin closes.
//
//   ROWGATE_WS=ws://127.0.0.1:3000/realtime/v1/websocket TOKEN=... TABLE=notes node fault_subscriber.mjs

import WebSocket from 'ws'

const { ROWGATE_WS: url, TOKEN: token, TABLE: table } = process.env
const say = (event) => process.stdout.write(JSON.stringify({ t: Date.now() / 1000, ...event }) + '\n')
let stopped = false
process.stdin.on('close', () => { stopped = true; process.exit(0) })
process.stdin.resume()

function connect () {
  if (stopped) return
  const ws = new WebSocket(`${url}?apikey=${token}&vsn=1.0.0`)
  let beat
  ws.on('open', () => {
    const changes = [{ event: '*', schema: 'public', table }]
    ws.send(JSON.stringify({
      topic: `realtime:${table}`, event: 'phx_join', ref: '1', join_ref: '1',
      payload: { config: { postgres_changes: changes }, access_token: token }
    }))
    beat = setInterval(() => ws.send(JSON.stringify({ topic: 'phoenix', event: 'heartbeat', payload: {}, ref: 'h' })), 5000)
  })
  ws.on('message', (data) => {
    const m = JSON.parse(data.toString())
    if (m.event === 'postgres_changes') {
      const r = m.payload.data.record || {}
      say({ kind: 'change', id: r.id, owner: r.owner, type: m.payload.data.type })
    } else if (m.event === 'system') {
      say({ kind: 'system', status: m.payload.status, message: m.payload.message })
    }
  })
  const again = () => { clearInterval(beat); say({ kind: 'closed' }); setTimeout(connect, 200) }
  ws.on('close', again)
  ws.on('error', () => {})
}
connect()
