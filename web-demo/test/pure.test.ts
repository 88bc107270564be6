// Unit tests of the pure helpers: URL params, palette, z-order keys, geometry, connection words.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { parseParams, cleanName, isValidRoom, DEFAULT_ROOM } from '../src/params.js'
import { swatch, fillPaint, colorForId, isColorName } from '@fairyring/client'
import { keyBetween, keyAbove, keyBelow, compareZ } from '@fairyring/client'
import { screenToPage, pageToScreen, zoomAt, resizeBox, bendControl, clampZoom, shapeBounds } from '../src/geometry.js'
import { describeRefusal, describeClose, describeStalled, probeUrl, CLOSE_TOKEN_EXPIRED, STALLED_AFTER } from '@fairyring/client'
import { fetchDevToken, parseDevToken, TokenError } from '@fairyring/client'
import { toolForKey, isGeoTool, TOOLS } from '../src/tools.js'

test('params: room and name from the query string', () => {
  assert.deepEqual(parseParams('?room=team-1.a_b&name=Ada'), { room: 'team-1.a_b', name: 'Ada', roomWasInvalid: false })
  assert.deepEqual(parseParams(''), { room: DEFAULT_ROOM, name: null, roomWasInvalid: false })
  const bad = parseParams('?room=../etc/passwd&name=%20%20')
  assert.equal(bad.room, 'etc-passwd')
  assert.equal(bad.roomWasInvalid, true)
  assert.equal(bad.name, null)
  assert.equal(isValidRoom('a'.repeat(128)), true)
  assert.equal(isValidRoom('a'.repeat(129)), false)
  assert.equal(isValidRoom(''), false)
})

test('params: names are trimmed, stripped of control characters and capped', () => {
  assert.equal(cleanName('  Bob\u0007 '), 'Bob')
  assert.equal(cleanName('x'.repeat(100))?.length, 40)
  assert.equal(cleanName(null), null)
  assert.equal(cleanName('\n\t'), null)
})

test('palette: tldraw names map to colours; unknown names fall back to black', () => {
  assert.equal(swatch('red').solid, '#e03131')
  assert.equal(swatch('no-such-colour'), swatch('black'))
  assert.equal(isColorName('light-violet'), true)
  assert.equal(isColorName('toString'), false)
  assert.deepEqual(fillPaint('blue', 'none'), { paint: 'none', opacity: 1 })
  assert.equal(fillPaint('blue', 'solid').paint, swatch('blue').semi)
  assert.equal(fillPaint('blue', 'pattern').paint, 'url(#pattern-blue)')
  assert.equal(fillPaint('nope', 'pattern').paint, 'url(#pattern-black)')
  assert.equal(fillPaint('blue', 'semi').opacity < 1, true)
  assert.equal(colorForId('user-1'), colorForId('user-1'))
})

/** A seeded PRNG so the property tests are deterministic. */
function rng (seed: number): () => number {
  let s = seed >>> 0
  return () => { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; return s / 2 ** 32 }
}

test('zorder: keys inserted anywhere keep a strict order (1000 random inserts)', () => {
  const r = rng(42)
  const keys: string[] = []
  for (let i = 0; i < 1000; i++) {
    const at = Math.floor(r() * (keys.length + 1))
    const k = keyBetween(keys[at - 1] ?? null, keys[at] ?? null)
    assert.notEqual(k, null)
    keys.splice(at, 0, k as string)
  }
  for (let i = 1; i < keys.length; i++) assert.ok((keys[i - 1] as string) < (keys[i] as string), `${keys[i - 1]} < ${keys[i]}`)
  assert.ok(keys.every(k => k.length < 40), 'keys stay short')
})

test('zorder: above/below work with foreign keys (hex, tldraw "a1", symbols)', () => {
  const foreign = ['80', 'a1', 'a1V', 'Zz', '0', '000', '~~', 'é', '-1']
  for (const k of foreign) {
    assert.ok(keyAbove([k]) > k, `above ${k}`)
    const below = keyBelow([k])
    if (below !== null) assert.ok(below < k, `below ${k}: ${below}`)
  }
  assert.equal(keyBelow(['']), null)
  assert.equal(keyBetween('b', 'a'), null)
  assert.equal(keyBetween('a', 'a'), null)
  const k = keyBetween('a0', 'a1')
  assert.ok(k !== null && k > 'a0' && k < 'a1')
  const between = keyBetween('80', '8001')
  assert.ok(between !== null && between > '80' && between < '8001', String(between))
})

test('zorder: ties sort by id so every peer draws the same order', () => {
  const a = { index: 'V', id: 'a' }
  const b = { index: 'V', id: 'b' }
  assert.equal(compareZ(a, b), -1)
  assert.equal(compareZ(b, a), 1)
  assert.equal(compareZ({ index: 'A', id: 'z' }, a), -1)
})

test('geometry: screen/page round trip and zooming around an anchor', () => {
  const cam = { x: 100, y: -50, zoom: 2 }
  const p = { x: 33, y: 44 }
  assert.deepEqual(screenToPage(cam, pageToScreen(cam, p)), p)
  const anchor = { x: 200, y: 120 }
  const before = screenToPage(cam, anchor)
  const z = zoomAt(cam, anchor, 4)
  const after = screenToPage(z, anchor)
  assert.ok(Math.abs(before.x - after.x) < 1e-9 && Math.abs(before.y - after.y) < 1e-9)
  assert.equal(clampZoom(1000), 8)
  assert.equal(clampZoom(Number.NaN), 1)
})

test('geometry: resizing past the fixed corner flips the box and keeps a minimum size', () => {
  assert.deepEqual(resizeBox({ x: 0, y: 0, w: 100, h: 50 }, 20, 10), { x: 0, y: 0, w: 120, h: 60 })
  assert.deepEqual(resizeBox({ x: 0, y: 0, w: 100, h: 50 }, -150, -50), { x: -50, y: 0, w: 50, h: 4 })
})

test('geometry: a bent arrow curves through the point `bend` units off its midpoint', () => {
  const c = bendControl({ x1: 0, y1: 0, x2: 100, y2: 0, bend: 20 })
  // Quadratic midpoint = (p0 + 2c + p2) / 4.
  assert.equal((0 + 2 * c.y + 0) / 4, -20)
  assert.deepEqual(bendControl({ x1: 5, y1: 5, x2: 5, y2: 5, bend: 20 }), { x: 5, y: 5 })
  const b = shapeBounds({
    id: 'a', kind: 'link', type: 'arrow', pageId: 'page:main', x: 0, y: 0, rotation: 0, index: 'V', color: 'black', fill: 'none',
    note: '', locked: false, createdBy: '', x1: 0, y1: 0, x2: 100, y2: 0, fromId: null, toId: null, bend: 20, text: ''
  })
  assert.equal(b.y, -20)
  assert.equal(b.w, 100)
})

test('connection: refusals and close codes get clear words', () => {
  assert.match(describeRefusal(401, { error: 'unauthorized', detail: 'token expired' }) ?? '', /refused.*token expired/)
  assert.match(describeRefusal(403, null) ?? '', /does not grant access/)
  assert.equal(describeRefusal(400, {}), null)
  assert.equal(describeRefusal(200, {}), null)
  assert.match(describeClose(CLOSE_TOKEN_EXPIRED, 'token expired') ?? '', /session expired/)
  assert.match(describeClose(4403, '') ?? '', /4403/)
  assert.equal(describeClose(1006, ''), null)
  assert.equal(probeUrl('http://127.0.0.1:9000', 'a.b', 't&x'), 'http://127.0.0.1:9000/rooms/a.b?token=t%26x')
  assert.equal(probeUrl('http://h', 'r', null), 'http://h/rooms/r')
  assert.equal(describeStalled(STALLED_AFTER - 1), null)
  assert.match(describeStalled(STALLED_AFTER) ?? '', /cannot connect after 3 tries/)
})

test('auth: dev token answers, a 404 means no dev mode, other failures are errors', async () => {
  const answer = (status: number, body: unknown): typeof fetch =>
    (async () => new Response(JSON.stringify(body), { status })) as unknown as typeof fetch
  const ok = await fetchDevToken('Ada', answer(200, { token: 'abc', sub: 'dev-ada', name: 'Ada', expires_at: 1700000000 }))
  assert.deepEqual(ok, { token: 'abc', sub: 'dev-ada', name: 'Ada', expiresAt: 1700000000 })
  assert.equal(await fetchDevToken('Ada', answer(404, { error: 'not found' })), null)
  await assert.rejects(fetchDevToken('Ada', answer(500, {})), TokenError)
  await assert.rejects(fetchDevToken('Ada', answer(200, { nope: 1 })), TokenError)
  const failing = (async () => { throw new Error('offline') }) as unknown as typeof fetch
  await assert.rejects(fetchDevToken('Ada', failing), TokenError)
  assert.throws(() => parseDevToken('str'), TokenError)
  assert.equal(parseDevToken({ token: 't' }).sub, 'anonymous')
})

test('tools: every tool has a unique data-tool name; shortcuts map to tools', () => {
  const names = TOOLS.map(t => t.name)
  assert.equal(new Set(names).size, names.length)
  for (const n of ['select', 'rectangle', 'ellipse', 'text', 'note', 'arrow', 'draw']) assert.ok(names.includes(n), n)
  assert.equal(toolForKey('R'), 'rectangle')
  assert.equal(toolForKey('q'), null)
  assert.equal(isGeoTool('ellipse'), true)
  assert.equal(isGeoTool('arrow'), false)
})
