// The room connection against the real server (and, for 1013, a stand-in server that closes
// every socket with it): two connections converge, concurrent edits of two properties of one
// shape both stay, presence is read back, the close codes arrive as typed events, a token is
// renewed before it expires, an expired one is replaced after 4401, and with `renewOnReconnect`
// every reconnect gets a new token first.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { once } from 'node:events'
import * as Y from 'yjs'
import WebSocket, { WebSocketServer } from 'ws'
import {
  RoomConnection, FairyringApi, createShape, updateShape, readShape, peersOf, publishPresence,
  jwtExpiry, type RoomClose, type RoomRefusal, type TokenGrant
} from '../src/index.js'
import { startServer, mintToken, until, type Server } from './server.js'

let server: Server
before(async () => { server = await startServer() })
after(async () => { await server?.stop() })

const open = (room: string, token: () => string | TokenGrant | null = () => mintToken('alice', 'read write')): RoomConnection =>
  new RoomConnection({ server: server.base, room, token, WebSocket })

/** Resolves with the first event `name` of `conn`. */
async function next<T> (conn: RoomConnection, name: 'close' | 'token-expired' | 'policy-violation' | 'too-large' | 'try-again' | 'refused' | 'token'): Promise<T> {
  return await new Promise<T>(resolve => { const off = conn.on(name, ((v: T) => { off(); resolve(v) }) as never) })
}

test('two connections converge; concurrent edits of two properties of one shape both stay', async () => {
  const a = open('conv')
  const b = new RoomConnection({ server: server.base.replace('http://', 'ws://'), room: 'conv', token: () => mintToken('bob', 'read write'), WebSocket })
  await Promise.all([a.whenSynced(), b.whenSynced()])
  createShape(a.doc, { id: 'box', type: 'rectangle', x: 0, y: 0, w: 100, h: 100 })
  await until('b to see the box', () => b.doc.getMap('shapes').has('box'))
  // Both edit at once, each a different property, before hearing the other.
  b.provider.disconnect()
  updateShape(a.doc, 'box', { color: 'red' })
  updateShape(b.doc, 'box', { w: 240 })
  b.provider.connect()
  const both = (d: Y.Doc): boolean => { const s = readShape('box', d.getMap('shapes').get('box')); return s?.color === 'red' && s.kind === 'geo' && s.w === 240 }
  await until('both edits in both documents', () => both(a.doc) && both(b.doc))
  const rest = await new FairyringApi({ baseUrl: server.base, token: () => mintToken('carol', 'read') }).roomDoc('conv')
  const box = rest.doc.shapes?.box as Record<string, unknown>
  assert.equal(box.color, 'red'); assert.equal(box.w, 240)
  // Presence: a's cursor, selection and viewport reach b.
  publishPresence(a.awareness, { user: { id: 'alice', name: 'Alice', color: '#e03131' }, cursor: { x: 5, y: 6 }, selection: ['box'], viewport: { x: 0, y: 0, w: 640, h: 480 } })
  await until('b to see alice', () => peersOf(b.awareness).users.some(u => u.id === 'alice' && u.cursor?.x === 5))
  const alice = peersOf(b.awareness).users.find(u => u.id === 'alice')
  assert.deepEqual(alice?.selection, ['box'])
  assert.deepEqual(alice?.viewport, { x: 0, y: 0, w: 640, h: 480 })
  a.destroy(); b.destroy()
})

test('1008: a write under a server-owned root closes with a typed event and no reconnect', async () => {
  const c = open('policy')
  await c.whenSynced()
  const violation = next<RoomClose>(c, 'policy-violation')
  c.doc.getMap('fairies').set('fake', 'mine')
  const close = await violation
  assert.equal(close.code, 1008)
  assert.equal(close.kind, 'policy')
  assert.match(close.reason, /fairies/)
  assert.equal(c.provider.shouldConnect, false, 'it does not reconnect by itself')
  c.destroy()
})

test('1009: an awareness state over the limit closes with a typed event', async () => {
  const c = open('size')
  await c.whenSynced()
  const tooLarge = next<RoomClose>(c, 'too-large')
  c.awareness.setLocalState({ user: { id: 'x', name: 'x'.repeat(40_000) } })
  assert.equal((await tooLarge).code, 1009)
  c.destroy()
})

test('4401: an expired session gets a new token from the callback and syncs again', async () => {
  let calls = 0
  // The first token is short-lived and given without its expiry, so no renewal is scheduled:
  // the server closes the session with 4401 when it expires.
  const c = open('expiry', () => (++calls === 1 ? { token: mintToken('dora', 'read write', '2s'), expiresAt: null } : mintToken('dora', 'read write')))
  await c.whenSynced()
  // Both listeners first: the new token follows the close within the same few ticks.
  const closed = next<RoomClose>(c, 'token-expired')
  const renewed = next<TokenGrant>(c, 'token')
  const expired = await closed
  assert.equal(expired.code, 4401)
  await renewed
  await until('a new session', () => c.synced)
  assert.equal(calls, 2)
  createShape(c.doc, { id: 'after', type: 'note' })
  const rest = new FairyringApi({ baseUrl: server.base, token: () => mintToken('erin', 'read') })
  // Until the write is durable the room has no history at all: 404 room_not_found means "not yet".
  await until('the write of the new session', async () => {
    try {
      return (await rest.roomDoc('expiry')).doc.shapes?.after !== undefined
    } catch (e) {
      if ((e as { status?: number }).status === 404) return false
      throw e
    }
  })
  c.destroy()
})

test('a token is renewed before it expires, and the session goes on with it', async () => {
  const tokens: string[] = []
  const c = open('renew', () => { const t = mintToken('finn', 'read write', tokens.length === 0 ? '3s' : '15m'); tokens.push(t); return t })
  const closes: RoomClose[] = []
  c.on('close', e => closes.push(e))
  await c.whenSynced()
  const exp = jwtExpiry(tokens[0]!)!
  await next(c, 'token')
  assert.ok(Date.now() < exp * 1000, 'renewed before the first token expired')
  await until('resynced with the new token', () => c.synced && c.token === tokens[1])
  assert.deepEqual(closes.filter(e => e.code === 4401), [])
  c.destroy()
})

test('a refused token is reported with the server\'s reason', async () => {
  const c = open('refused', () => 'not-a-jwt')
  const refusal = await next<RoomRefusal>(c, 'refused')
  assert.equal(refusal.status, 401)
  assert.equal(refusal.error, 'malformed_token')
  c.destroy()
})

test('1013 is a typed event and the connection tries again by itself', async () => {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' })
  await once(wss, 'listening')
  let connections = 0
  wss.on('connection', ws => { connections++; ws.close(1013, 'room_reloading') })
  const port = (wss.address() as { port: number }).port
  const c = new RoomConnection({ server: `ws://127.0.0.1:${port}`, room: 'r', WebSocket })
  const first = await next<RoomClose>(c, 'try-again')
  assert.deepEqual([first.code, first.kind, first.reason], [1013, 'try-again', 'room_reloading'])
  await until('a second attempt', () => connections >= 2)
  c.destroy()
  await new Promise(resolve => wss.close(resolve))
})

test('renewOnReconnect: a new token before every reconnect, and no socket while the token source fails', async () => {
  // A stand-in server that takes each socket and closes it at once as a restarting server does.
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' })
  await once(wss, 'listening')
  const seen: Array<string | null> = []
  wss.on('connection', (ws, req) => { seen.push(new URL(req.url ?? '/', 'http://x').searchParams.get('token')); ws.close(1001, 'going away') })
  const port = (wss.address() as { port: number }).port
  let calls = 0
  let down = false
  const c = new RoomConnection({
    server: `ws://127.0.0.1:${port}`, room: 'r', WebSocket, renewOnReconnect: true,
    token: () => { calls++; if (down) throw new Error('cannot reach the server'); return `t${calls}` }
  })
  const errors: Error[] = []
  c.on('error', e => errors.push(e))
  await until('three sockets', () => seen.length >= 3)
  assert.deepEqual(seen.slice(0, 3), ['t1', 't2', 't3'], 'each socket with the token fetched just before it')
  // The token source fails (the server is down): attempts count as failures, no socket opens.
  const failures: number[] = []
  c.on('connect-failed', n => failures.push(n))
  down = true
  const callsWhenDown = calls
  const opened = seen.length
  await until('two failed attempts', () => failures.length >= 2)
  assert.ok(seen.length <= opened + 1, `no socket without a token (${seen.length - opened} opened)`)
  assert.deepEqual(errors, [], 'a failing source while reconnecting is no error event')
  down = false
  const before = seen.length
  await until('a socket again once the source answers', () => seen.length > before)
  const last = Number((seen[seen.length - 1] ?? '').slice(1))
  assert.ok(last > callsWhenDown + 1, `the new socket has a token fetched after the failures (t${last})`)
  c.destroy()
  await new Promise(resolve => wss.close(resolve))
})
