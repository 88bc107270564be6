// Review mode: the time from `POST /rooms/{room}/suggestions/{id}/accept` to the accepted
// shape at every peer (three official y-websocket clients in the room), and the HTTP answer's
// time. A fairy invited with "apply": "suggest" is asked ROUNDS times to "draw a house" (the
// offline model proposes four shapes); each suggestion is accepted on its own, one at a time.
// Usage (from the repository root, a server started with --insecure-no-auth, the offline model):
//   node tests/interop/review-accept-latency.mjs http://127.0.0.1:8080 [ROUNDS=20]
// Prints one JSON line. Not run by `cargo test`: a measurement (docs/benchmarks.md).
import * as Y from 'yjs'
import { WebsocketProvider } from 'y-websocket'
import WebSocket from 'ws'
const base = process.argv[2]; const rounds = Number(process.argv[3] || 20)
const room = 'lat-' + Date.now()
const peers = []
for (let i = 0; i < 3; i++) {
  const doc = new Y.Doc()
  const p = new WebsocketProvider(base.replace('http', 'ws') + '/rooms', room, doc, { WebSocketPolyfill: WebSocket })
  peers.push({ doc, p })
}
await Promise.all(peers.map(({ p }) => new Promise(r => p.on('sync', s => s && r()))))
const post = async (path, body) => {
  const r = await fetch(base + '/rooms/' + room + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body || {}) })
  return [r.status, await r.json().catch(() => null)]
}
const [, fairy] = await post('/fairies', { name: 'Lat', apply: 'suggest' })
const sleep = ms => new Promise(r => setTimeout(r, ms))
const http = []; const all = []
for (let round = 0; round < rounds; round++) {
  const [, pr] = await post(`/fairies/${fairy.id}/prompt`, { message: 'draw a house', bounds: { x: round * 600, y: 0, w: 500, h: 500 } })
  const sugg = peers[0].doc.getMap('suggestions')
  let pending = []
  for (let t = 0; t < 500; t++) {
    pending = [...sugg.values()].filter(m => m.get('requestId') === pr.requestId && m.get('status') === 'pending' && m.get('streaming') === false)
    if (pending.length >= 4) break
    await sleep(10)
  }
  await sleep(50)
  for (const rec of pending) {
    const shapeId = rec.get('shapeId')
    const seen = peers.map(({ doc }) => new Promise(r => {
      const shapes = doc.getMap('shapes')
      if (shapes.has(shapeId)) return r(performance.now())
      const f = () => { if (shapes.has(shapeId)) { shapes.unobserve(f); r(performance.now()) } }
      shapes.observe(f)
    }))
    const t0 = performance.now()
    const [st] = await post(`/suggestions/${rec.get('id')}/accept`)
    const t1 = performance.now()
    if (st !== 200) { console.error('accept', st); continue }
    const times = await Promise.all(seen)
    http.push(t1 - t0); all.push(Math.max(...times) - t0)
  }
}
const pct = (a, q) => { const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.floor(q * s.length))].toFixed(1) }
console.log(JSON.stringify({ accepts: all.length, http_p50: pct(http, 0.5), http_p99: pct(http, 0.99), every_peer_p50: pct(all, 0.5), every_peer_p90: pct(all, 0.9), every_peer_p99: pct(all, 0.99), max: Math.max(...all).toFixed(1) }))
peers.forEach(({ p }) => p.destroy()); process.exit(0)
