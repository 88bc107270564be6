// Unit tests over real Yjs documents: reading schema v1, rendering, edits as single transactions,
// undo scoped to our own origin, locked shapes, and presence parsing.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import * as Y from 'yjs'
import { readShape, readShapes, readPoints, GEO_KINDS } from '@fairyring/client'
import { renderShape, renderDefs, geoPath, geoMarks, linkPath, drawPath, wrapText } from '../src/render.js'
import { findNode, textOf, type VNode } from '../src/vnode.js'
import * as ops from '../src/ops.js'
import { readPeers } from '@fairyring/client'
import { renderCursors, renderOwnSelection, renderPeerSelections, strokeFromPage, translateShape, renderFairies } from '../src/overlay.js'
import { readFairyChats, readTasks } from '@fairyring/client'

const ME = { local: 'me' }

function shapeMap (doc: Y.Doc, id: string, props: Record<string, unknown>): void {
  const m = new Y.Map<unknown>()
  for (const [k, v] of Object.entries(props)) m.set(k, v)
  doc.getMap('shapes').set(id, m)
}

function transactionsWith (doc: Y.Doc, origin: unknown): () => number {
  let n = 0
  doc.on('afterTransaction', (tr: Y.Transaction) => { if (tr.origin === origin && tr.changed.size > 0) n++ })
  return () => n
}

test('schema: reads every kind with defaults and survives bad values', () => {
  const doc = new Y.Doc()
  doc.transact(() => {
    shapeMap(doc, 'box1', { id: 'box1', type: 'rectangle', x: 10, y: '20', w: -5, h: 'wide', color: 'red', locked: true })
    shapeMap(doc, 'note1', { type: 'note', text: 'hi', x: Number.NaN })
    shapeMap(doc, 'a1', { type: 'arrow', x1: 0, y1: 0, x2: 50, y2: 0, bend: '12', fromId: 'box1', toId: '' })
    const pts = new Y.Array<unknown>()
    pts.push([0, 0, 10, 'x', 20, 5, 7])
    shapeMap(doc, 'pen', { type: 'draw', points: pts })
    shapeMap(doc, 't', { type: 'text', text: 'hello', fontSize: 0, maxWidth: 200 })
    doc.getMap('shapes').set('junk', 'not a map')
  })
  const byId = new Map(readShapes(doc.getMap('shapes')).map(s => [s.id, s]))
  assert.equal(byId.size, 5, 'the non-map entry is skipped')
  const box = byId.get('box1')
  assert.ok(box?.kind === 'geo')
  assert.equal(box.y, 20)
  assert.equal(box.w, 1)
  assert.equal(box.h, 100)
  assert.equal(box.locked, true)
  const note = byId.get('note1')
  assert.ok(note?.kind === 'note')
  assert.equal(note.x, 0)
  assert.equal(note.pageId, 'page:main')
  const arrow = byId.get('a1')
  assert.ok(arrow?.kind === 'link')
  assert.equal(arrow.bend, 12)
  assert.equal(arrow.fromId, 'box1')
  assert.equal(arrow.toId, null)
  const pen = byId.get('pen')
  assert.ok(pen?.kind === 'draw')
  assert.deepEqual(pen.points, [0, 0, 20, 5], 'the point with a bad coordinate and the odd tail are dropped')
  const t = byId.get('t')
  assert.ok(t?.kind === 'text')
  assert.equal(t.fontSize, 1)
  assert.equal(readShape('x', 42), null)
  assert.deepEqual(readPoints([1, 2, 3]), [1, 2])
})

function walk (n: VNode, visit: (n: VNode) => void): void {
  visit(n)
  for (const c of n.children) if (typeof c !== 'string') walk(c, visit)
}

test('render: every kind has a root with data-shape-id and finite path data', () => {
  const doc = new Y.Doc()
  doc.transact(() => {
    GEO_KINDS.forEach((k, i) => shapeMap(doc, `g${i}`, { type: k, x: i, y: i, w: 80, h: 60, text: 'label', fill: 'pattern', color: 'blue' }))
    shapeMap(doc, 'unknown', { type: 'blob', w: 10, h: 10 })
    shapeMap(doc, 'note', { type: 'note', text: 'a b c' })
    shapeMap(doc, 'line', { type: 'line', x1: 0, y1: 0, x2: 10, y2: 10, bend: 5, text: 'x' })
    shapeMap(doc, 'text', { type: 'text', text: 'one\ntwo' })
  })
  for (const s of readShapes(doc.getMap('shapes'))) {
    const v = renderShape(s)
    assert.equal(v.tag, 'g')
    assert.equal(v.attrs['data-shape-id'], s.id)
    walk(v, n => {
      for (const [k, val] of Object.entries(n.attrs)) assert.ok(!String(val).includes('NaN') && !String(val).includes('Infinity'), `${s.id}.${k}=${val}`)
    })
  }
  for (const k of GEO_KINDS) assert.ok(geoPath(k, 100, 50).startsWith('M'), k)
  // Marks are separate open strokes so a filled check-box does not fill its tick.
  assert.ok(!geoPath('check-box', 10, 10).includes('L4.5'))
  assert.equal(geoMarks('check-box', 10, 10), 'M2.5,5 L4.5,7.2 L7.8,2.8')
  assert.equal(geoMarks('rectangle', 10, 10), null)
  const defs = renderDefs()
  assert.ok(findNode(defs, n => n.attrs.id === 'arrowhead-red') !== null)
  assert.ok(findNode(defs, n => n.attrs.id === 'pattern-violet') !== null)
})

test('render: text stays text (no markup), locked shapes are marked in progress', () => {
  const doc = new Y.Doc()
  shapeMap(doc, 'evil', { type: 'rectangle', text: '<img/src=x/onerror=alert(1)>', locked: true })
  const s = readShape('evil', doc.getMap('shapes').get('evil'))
  assert.ok(s !== null)
  const v = renderShape(s)
  assert.equal(v.attrs['data-locked'], 'true')
  assert.match(String(v.attrs.class), /locked/)
  assert.ok(textOf(v).includes('<img/src=x/onerror=alert(1)>'), 'kept as a string child, never parsed')
  assert.ok(findNode(v, n => n.tag === 'img') === null)
})

test('render: arrows bend, pens draw, text wraps', () => {
  assert.equal(linkPath({ x1: 0, y1: 0, x2: 100, y2: 0, bend: 0 }), 'M0,0 L100,0')
  assert.match(linkPath({ x1: 0, y1: 0, x2: 100, y2: 0, bend: 10 }), /^M0,0 Q50,-20 100,0$/)
  assert.equal(drawPath([]), '')
  assert.equal(drawPath([1, 2, 3, 4]), 'M1,2 L3,4')
  assert.match(drawPath([1, 2]), /^M1,2 L/)
  assert.deepEqual(wrapText('aaa bbb ccc', 10, 45), ['aaa bbb', 'ccc'])
  assert.deepEqual(wrapText('one\ntwo', 10, null), ['one', 'two'])
})

test('ops: each gesture is one transaction with our origin, authored by user:SUB', () => {
  const doc = new Y.Doc()
  const count = transactionsWith(doc, ME)
  const id = ops.createShape(doc, ME, 'dev-ada', 'rectangle', { x: 1, y: 2, w: 30, h: 40, color: 'red' })
  const pen = ops.createShape(doc, ME, 'dev-ada', 'draw', { x: 0, y: 0, points: [0, 0, 5, 5] })
  const arrow = ops.createShape(doc, ME, 'dev-ada', 'arrow', { x1: 0, y1: 0, x2: 10, y2: 0, fromId: id, toId: null })
  assert.equal(count(), 3)
  const m = doc.getMap('shapes').get(id) as Y.Map<unknown>
  assert.equal(m.get('id'), id)
  assert.equal(m.get('createdBy'), 'user:dev-ada')
  assert.equal(m.get('pageId'), 'page:main')
  assert.ok((doc.getMap('shapes').get(pen) as Y.Map<unknown>).get('points') instanceof Y.Array)
  assert.equal((doc.getMap('shapes').get(arrow) as Y.Map<unknown>).has('toId'), false, 'null props are left out')
  ops.moveShapes(doc, ME, [id, arrow], 10, 20)
  assert.equal(count(), 4)
  const a = ops.getShape(doc, arrow)
  assert.ok(a?.kind === 'link')
  assert.deepEqual([a.x1, a.y1, a.x2, a.y2], [10, 20, 20, 20])
  ops.resizeShape(doc, ME, id, { x: 0, y: 0, w: 5, h: 6 })
  ops.setStyle(doc, ME, [id, pen], 'color', 'blue')
  ops.setText(doc, ME, id, 'hello')
  ops.reorder(doc, ME, [id], 'front')
  assert.equal(count(), 8)
  const shapes = ops.getShape(doc, id)
  assert.ok(shapes?.kind === 'geo')
  assert.deepEqual([shapes.w, shapes.h, shapes.color, shapes.text], [5, 6, 'blue', 'hello'])
  ops.deleteShapes(doc, ME, [id, pen])
  assert.equal(count(), 9)
  assert.equal(doc.getMap('shapes').size, 1)
  // Bad input changes nothing.
  ops.moveShapes(doc, ME, [arrow], Number.NaN, 1)
  ops.resizeShape(doc, ME, arrow, { x: 0, y: 0, w: -1, h: 5 })
  assert.equal(count(), 9)
})

test('ops: z-order front/back keeps relative order among the moved shapes', () => {
  const doc = new Y.Doc()
  const ids = ['a', 'b', 'c', 'd'].map(n => ops.createShape(doc, ME, 's', 'rectangle', {}, n))
  const order = (): string[] => readShapes(doc.getMap('shapes')).sort((x, y) => (x.index < y.index ? -1 : 1)).map(s => s.id)
  assert.deepEqual(order(), ids)
  ops.reorder(doc, ME, ['c', 'a'], 'front')
  assert.deepEqual(order(), ['b', 'd', 'a', 'c'])
  ops.reorder(doc, ME, ['c', 'd'], 'back')
  assert.deepEqual(order(), ['d', 'c', 'b', 'a'])
})

test('ops: locked shapes are never edited, moved, restyled or deleted', () => {
  const doc = new Y.Doc()
  shapeMap(doc, 'wip', { type: 'rectangle', x: 0, y: 0, w: 10, h: 10, locked: true, color: 'black', text: '' })
  const before = JSON.stringify(doc.getMap('shapes').toJSON())
  ops.moveShapes(doc, ME, ['wip'], 5, 5)
  ops.resizeShape(doc, ME, 'wip', { x: 0, y: 0, w: 50, h: 50 })
  ops.setStyle(doc, ME, ['wip'], 'color', 'red')
  ops.setText(doc, ME, 'wip', 'x')
  ops.reorder(doc, ME, ['wip'], 'front')
  ops.deleteShapes(doc, ME, ['wip'])
  assert.equal(JSON.stringify(doc.getMap('shapes').toJSON()), before)
})

test('undo: undoes only our own gestures, one gesture at a time, and keeps others\' edits', () => {
  const doc = new Y.Doc()
  const undo = ops.ownUndoManager(doc, ME)
  const id = ops.createShape(doc, ME, 's', 'rectangle', { x: 0, y: 0 })
  ops.moveShapes(doc, ME, [id], 100, 0)
  // Someone else (another origin, as a remote update would be) recolours the shape and adds one.
  doc.transact(() => {
    (doc.getMap('shapes').get(id) as Y.Map<unknown>).set('color', 'green')
  }, 'remote')
  ops.createShape(doc, 'remote', 'other', 'ellipse', {}, 'theirs')
  undo.undo()
  let s = ops.getShape(doc, id)
  assert.equal(s?.x, 0, 'the move is undone')
  assert.equal(s?.color, 'green', 'the other person\'s recolour stays')
  assert.ok(ops.getShape(doc, 'theirs') !== null, 'their shape stays')
  undo.redo()
  s = ops.getShape(doc, id)
  assert.equal(s?.x, 100)
  undo.undo()
  undo.undo()
  assert.equal(ops.getShape(doc, id), null, 'the creation is undone')
  assert.ok(ops.getShape(doc, 'theirs') !== null)
  assert.equal(undo.canUndo(), false)
})

test('presence: peers are split into people and fairies; ours and junk are ignored', () => {
  const states = new Map<number, unknown>([
    [1, { user: { id: 'me', name: 'Me', color: '#fff' }, cursor: null, selection: [] }],
    [2, { user: { id: 'u2', name: 'Bob', color: 'javascript:alert(1)' }, cursor: { x: 5, y: 'no' }, selection: ['a', 3] }],
    [3, { user: { id: 'u3', name: 'Ann', color: '#e03131' }, cursor: { x: 1, y: 2 }, selection: 'x' }],
    [4, { fairy: { id: 'f1', name: 'Pixie', x: 10, y: 20, mode: 'soloing', thinking: true } }],
    [5, null],
    [6, 'garbage'],
    [7, {}]
  ])
  const { users, fairies } = readPeers(states, 1)
  assert.deepEqual(users.map(u => u.name), ['Ann', 'Bob'])
  const bob = users[1]
  assert.ok(bob !== undefined)
  assert.equal(bob.color, '#4465e9', 'a colour that is not a CSS colour is replaced')
  assert.equal(bob.cursor, null)
  assert.deepEqual(bob.selection, ['a'])
  assert.deepEqual(users[0]?.cursor, { x: 1, y: 2 })
  assert.equal(fairies.length, 1)
  assert.equal(fairies[0]?.name, 'Pixie')
  assert.equal(fairies[0]?.thinking, '…', 'an old boolean thought reads as an ellipsis')
  assert.equal(fairies[0]?.pose, 'idle')
  assert.deepEqual(fairies[0]?.todo, [])
})

test('overlay: cursors carry data-peer, selections show names, strokes are relative', () => {
  const peers = [{ clientId: 77, id: 'u', name: 'Ann', color: '#e03131', cursor: { x: 10, y: 10 }, selection: ['a', 'gone'], viewport: null }]
  const cursors = renderCursors(peers, { x: 0, y: 0, zoom: 2 })
  const c = findNode(cursors, n => n.attrs['data-peer'] === '77')
  assert.ok(c !== null)
  assert.equal(c.attrs.transform, 'translate(20,20)')
  assert.ok(textOf(c).includes('Ann'))
  const doc = new Y.Doc()
  shapeMap(doc, 'a', { type: 'rectangle', x: 0, y: 0, w: 10, h: 10 })
  const shapes = new Map(readShapes(doc.getMap('shapes')).map(s => [s.id, s]))
  const sel = renderPeerSelections(peers, shapes, 1)
  assert.equal(sel.children.length, 1, 'selection of a missing shape is not drawn')
  const a = shapes.get('a')
  assert.ok(a !== undefined)
  assert.ok(findNode(renderOwnSelection([a], 1), n => n.attrs['data-handle'] === 'resize') !== null)
  assert.ok(findNode(renderOwnSelection([{ ...a, locked: true }], 1), n => n.attrs['data-handle'] === 'resize') === null)
  assert.deepEqual(strokeFromPage([{ x: 10, y: 10 }, { x: 15, y: 12 }]), { x: 10, y: 10, points: [0, 0, 5, 2] })
  assert.equal(strokeFromPage([]), null)
  assert.equal(translateShape(a, 5, 6).x, 5)
  const fairies = renderFairies([{ id: 'f1', name: 'Pixie', x: 1, y: 2, mode: 'idling', pose: 'idle', flip: false, hat: '', color: null, selected: false, thinking: '', lastMessage: '' }])
  assert.ok(findNode(fairies, n => n.attrs['data-fairy'] === 'f1') !== null)
})

test('fairy layer: chat and tasks are read defensively', () => {
  const doc = new Y.Doc()
  doc.transact(() => {
    const fairy = new Y.Map<unknown>()
    fairy.set('name', 'Pixie')
    const chat = new Y.Array<unknown>()
    chat.push([{ from: 'Pixie', role: 'assistant', text: 'hello', at: 1 }, 'junk'])
    fairy.set('chat', chat)
    doc.getMap('fairies').set('f1', fairy)
    const task = new Y.Map<unknown>()
    task.set('title', 'Draw a cat'); task.set('status', 'in-progress')
    task.set('x', 0); task.set('y', 0); task.set('w', 100); task.set('h', 50)
    doc.getMap('tasks').set('t1', task)
    doc.getMap('tasks').set('t2', { title: 'No bounds' })
  })
  const chats = readFairyChats(doc.getMap('fairies'))
  assert.equal(chats[0]?.name, 'Pixie')
  assert.deepEqual(chats[0]?.chat, [{ from: 'Pixie', role: 'assistant', text: 'hello', at: 1, requestId: null, rejected: false }])
  const tasks = readTasks(doc.getMap('tasks'))
  assert.equal(tasks.length, 2)
  assert.deepEqual(tasks.find(t => t.id === 't1')?.frame?.box, { x: 0, y: 0, w: 100, h: 50 })
  assert.equal(tasks.find(t => t.id === 't2')?.frame, null)
})

test('scene: a move preview shifts the moved shapes but never a locked one', async () => {
  const { displayShapes } = await import('../src/scene.js')
  const doc = new Y.Doc()
  shapeMap(doc, 'a', { type: 'rectangle', x: 0, y: 0 })
  shapeMap(doc, 'wip', { type: 'rectangle', x: 0, y: 0, locked: true })
  const shapes = readShapes(doc.getMap('shapes'))
  const shown = displayShapes(shapes, { kind: 'move', start: { x: 0, y: 0 }, ids: ['a', 'wip'], dx: 5, dy: 7 })
  assert.deepEqual(shown.map(s => [s.id, s.x, s.y]).sort(), [['a', 5, 7], ['wip', 0, 0]])
  assert.equal(displayShapes(shapes, null), shapes)
})
