// Awareness read as untrusted input, and the connection's pure rules: close codes, token expiry.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { closeKind, jwtExpiry, readPeers, reconnectsAfter, refreshDelay, publishPresence, peersOf } from '../src/index.js'

test('people and fairies from awareness states; garbage skipped, values bounded', () => {
  const states = new Map<number, unknown>([
    [1, { user: { id: 'me', name: 'Me', color: '#123' } }],
    [2, { user: { id: 'u2', name: 'Ada', color: 'url(javascript:alert(1))' }, cursor: { x: 1, y: 'no' }, selection: ['a', 3, 'b'], viewport: { x: 0, y: 0, w: 800, h: 600 } }],
    [3, { fairy: { id: 'f1', name: 'Pip', x: 10, y: Infinity, mode: 'soloing', pose: 'dancing', todo: [{ text: 'roof' }, 5], taskId: 't1', tasks: [{ id: 't1', title: 'Roof', status: 'in-progress' }, { title: 'no id' }] } }],
    [4, 'not an object'],
    [5, { fairy: 'nope' }]
  ])
  const { users, fairies } = readPeers(states, 1)
  assert.equal(users.length, 1)
  assert.equal(users[0]?.color, '#4465e9', 'an unsafe colour is replaced')
  assert.equal(users[0]?.cursor, null)
  assert.deepEqual(users[0]?.selection, ['a', 'b'])
  assert.deepEqual(users[0]?.viewport, { x: 0, y: 0, w: 800, h: 600 })
  assert.equal(fairies.length, 1)
  assert.equal(fairies[0]?.y, 0)
  assert.equal(fairies[0]?.pose, 'idle')
  assert.equal(fairies[0]?.todo.length, 1)
  assert.equal(fairies[0]?.taskId, 't1')
  assert.deepEqual(fairies[0]?.tasks, [{ id: 't1', title: 'Roof', status: 'in-progress' }])
  let local: Record<string, unknown> | null = { user: { id: 'me' }, cursor: null }
  const aw = { clientID: 1, getLocalState: () => local, setLocalState: (s: Record<string, unknown> | null) => { local = s }, getStates: () => states }
  publishPresence(aw, { cursor: { x: 4, y: 5 } })
  assert.deepEqual(local, { user: { id: 'me' }, cursor: { x: 4, y: 5 } })
  assert.equal(peersOf(aw).users.length, 1)
})

test('close codes: kinds and whether the connection reconnects by itself', () => {
  assert.equal(closeKind(4401), 'token-expired')
  assert.equal(closeKind(1008), 'policy')
  assert.equal(closeKind(1009), 'too-large')
  assert.equal(closeKind(1013), 'try-again')
  assert.equal(reconnectsAfter(1013), true)
  assert.equal(reconnectsAfter(1001), true)
  assert.equal(reconnectsAfter(1008), false)
  assert.equal(reconnectsAfter(1009), false)
  assert.equal(reconnectsAfter(4401), false)
})

test('token expiry: read from the JWT, renewed before it', () => {
  const payload = Buffer.from(JSON.stringify({ sub: 'a', exp: 2000 })).toString('base64url')
  assert.equal(jwtExpiry(`h.${payload}.s`), 2000)
  assert.equal(jwtExpiry('not a jwt'), null)
  assert.equal(refreshDelay(2000, 1_000_000, 60_000), 940_000, 'a minute before a long-lived token expires')
  assert.equal(refreshDelay(2000, 1_990_000, 60_000), 5_000, 'half-way through a short one')
  assert.equal(refreshDelay(2000, 2_500_000, 60_000), 0)
})
