// Unit tests of what a newcomer meets first: room names that become slugs (never another room),
// the keyboard's order over the canvas's shapes, the zoom label and the sidebar's default.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { parseParams, roomSlug, urlWithRoom, isValidRoom, DEFAULT_ROOM } from '../src/params.js'
import { focusOrder, stepFocus, zoomLabel, sidebarCollapsedFor, focusDescription } from '../src/keyboard.js'
import { MAIN_PAGE, type Shape } from '@fairyring/client'

test('room slug: an invalid name becomes a readable valid slug, never the default room', () => {
  assert.equal(roomSlug('team alpha'), 'team-alpha')
  assert.equal(roomSlug('café-☕'), 'cafe')
  assert.equal(roomSlug('  Ünïcödé  Room!! '), 'Unicode-Room')
  assert.equal(roomSlug('a/b\\c?d#e'), 'a-b-c-d-e')
  assert.equal(roomSlug('..dots !'), 'dots')
  // Valid names are kept exactly.
  assert.equal(roomSlug('team-1.a_b'), 'team-1.a_b')
  assert.equal(roomSlug(DEFAULT_ROOM), DEFAULT_ROOM)
  // Nothing usable left: a stable name from the name's hash, not `demo`.
  const cup = roomSlug('☕☕')
  assert.match(cup, /^room-[0-9a-f]{8}$/)
  assert.equal(roomSlug('☕☕'), cup, 'the same name gives the same room')
  assert.notEqual(roomSlug('☕'), cup, 'another name gives another room')
  assert.match(roomSlug(''), /^room-[0-9a-f]{8}$/)
  // At most 128 characters, no dash left at the cut.
  const long = roomSlug(`${'a'.repeat(127)} b${'c'.repeat(50)}`)
  assert.equal(long, 'a'.repeat(127))
  for (const raw of ['team alpha', 'café-☕', '☕☕', '', ' ', '-', '.', 'x'.repeat(300) + '!', '😀 party 🎉', 'tab\there']) {
    const slug = roomSlug(raw)
    assert.ok(isValidRoom(slug), `${JSON.stringify(raw)} → ${JSON.stringify(slug)} is valid`)
    assert.notEqual(slug, DEFAULT_ROOM, `${JSON.stringify(raw)} does not open the default room`)
  }
})

test('room slug: parseParams opens the slug and says the name was invalid', () => {
  assert.deepEqual(parseParams('?room=team%20alpha&name=Ada'), { room: 'team-alpha', name: 'Ada', roomWasInvalid: true })
  assert.deepEqual(parseParams('?room=team+alpha'), { room: 'team-alpha', name: null, roomWasInvalid: true })
  assert.deepEqual(parseParams(`?room=${encodeURIComponent('café-☕')}`), { room: 'cafe', name: null, roomWasInvalid: true })
  assert.deepEqual(parseParams('?room=team'), { room: 'team', name: null, roomWasInvalid: false })
  assert.equal(parseParams('?room=').room === DEFAULT_ROOM, false)
})

test('room slug: the URL shown names the slug and keeps the other parameters', () => {
  const u = new URL(urlWithRoom('http://127.0.0.1:8080/?room=team%20alpha&name=Ada#x', 'team-alpha'))
  assert.equal(u.searchParams.get('room'), 'team-alpha')
  assert.equal(u.searchParams.get('name'), 'Ada')
  assert.equal(u.hash, '#x')
})

const geo = (id: string, x: number, y: number, w = 50, h = 50): Shape => ({
  id, kind: 'geo', type: 'rectangle', pageId: MAIN_PAGE, x, y, w, h, rotation: 0, index: 'a0', color: 'black', fill: 'none',
  note: '', locked: false, createdBy: 'user:a', text: '', textAlign: 'middle'
})

test('keyboard: shapes are visited in reading order, rows within a slop', () => {
  const shapes = [geo('c', 0, 200), geo('b', 300, 10), geo('a', 0, 0), geo('d', 100, 205)]
  assert.deepEqual(focusOrder(shapes), ['a', 'b', 'c', 'd'])
  assert.deepEqual(focusOrder([]), [])
  // Ties in place go by id, the same in every browser.
  assert.deepEqual(focusOrder([geo('y', 0, 0), geo('x', 0, 0)]), ['x', 'y'])
})

test('keyboard: Tab steps off the ends (focus leaves the canvas), arrows wrap', () => {
  const order = ['a', 'b', 'c']
  assert.equal(stepFocus(order, null, 1, false), 'a')
  assert.equal(stepFocus(order, null, -1, false), 'c')
  assert.equal(stepFocus(order, 'a', 1, false), 'b')
  assert.equal(stepFocus(order, 'c', 1, false), null)
  assert.equal(stepFocus(order, 'a', -1, false), null)
  assert.equal(stepFocus(order, 'c', 1, true), 'a')
  assert.equal(stepFocus(order, 'a', -1, true), 'c')
  assert.equal(stepFocus(order, 'gone', 1, true), 'a')
  assert.equal(stepFocus([], 'a', 1, true), null)
})

test('keyboard: the canvas says which shape has focus', () => {
  const shapes = [geo('a', 0, 0), { ...geo('b', 100, 0), text: 'Roof' }]
  const order = focusOrder(shapes)
  assert.equal(focusDescription(shapes, order, 'b', ['b']), 'rectangle "Roof", selected, 2 of 2')
  assert.equal(focusDescription(shapes, order, 'a', []), 'rectangle, 1 of 2')
  assert.equal(focusDescription([], [], null, []), 'canvas, empty')
})

test('zoom label shows the zoom; the sidebar starts collapsed below 1000 px', () => {
  assert.equal(zoomLabel(1), '100%')
  assert.equal(zoomLabel(1.25), '125%')
  assert.equal(zoomLabel(0.8), '80%')
  assert.equal(zoomLabel(0.1), '10%')
  assert.equal(zoomLabel(Number.NaN), '100%')
  assert.equal(sidebarCollapsedFor(800), true)
  assert.equal(sidebarCollapsedFor(999), true)
  assert.equal(sidebarCollapsedFor(1000), false)
  assert.equal(sidebarCollapsedFor(1400), false)
})
