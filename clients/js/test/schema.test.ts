// The document schema as this package reads and writes it (docs/document-schema.md): every
// shape kind and geo kind round-trips through a Y.Doc and its JSON form, writers refuse what the
// server's REST writes refuse, write only what changes, and keep concurrent edits of different
// properties; pages, suggestions, fairies, projects and tasks read defensively.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import * as Y from 'yjs'
import {
  GEO_KINDS, MAIN_PAGE, SchemaError, createShape, updateShape, deleteShapes, readShape, readShapes, readShapeJson,
  shapeRecord, readPages, writePage, deletePage, readSuggestions, readFairyChats, readProjects, readTasks,
  familyOf, normalizeColor, normalizeShapeId, COLOR_NAMES, FILL_NAMES, type ShapeInput
} from '../src/index.js'

const doc = (): Y.Doc => new Y.Doc()

test('every geo kind and every other kind round-trips through a Y.Doc and its JSON form', () => {
  const d = doc()
  const inputs: ShapeInput[] = [
    ...GEO_KINDS.map((t, i) => ({ id: `g${i}`, type: t, x: i * 10, y: 5, w: 120, h: 80, color: 'blue', fill: 'semi', text: `geo ${t}`, textAlign: 'start' })),
    { id: 't1', type: 'text', x: 1, y: 2, text: 'hello', fontSize: 32, maxWidth: 240, textAlign: 'end', color: 'red' },
    { id: 'n1', type: 'note', x: 3, y: 4, text: 'a note', color: 'yellow' },
    { id: 'a1', type: 'arrow', x1: 10, y1: 50, x2: 200, y2: 20, fromId: 'g0', toId: 't1', bend: 12, text: 'to' },
    { id: 'l1', type: 'line', x1: 0, y1: 0, x2: -40, y2: 30 },
    { id: 'p1', type: 'draw', x: 50, y: 60, points: [0, 0, 5, 5, 10, 2], color: 'green' }
  ]
  for (const s of inputs) createShape(d, s)
  const shapes = d.getMap('shapes')
  const json = shapes.toJSON() as Record<string, unknown>
  for (const s of inputs) {
    const read = readShape(s.id as string, shapes.get(s.id as string))
    assert.ok(read !== null, s.id)
    assert.deepEqual(readShapeJson(s.id as string, json[s.id as string]), read, `JSON form of ${String(s.id)}`)
    for (const [k, v] of Object.entries(s)) {
      if (k === 'x1' || k === 'y1' || k === 'x2' || k === 'y2' || k === 'fromId' || k === 'toId' || k === 'bend' || k === 'text' || k === 'points' ||
        k === 'w' || k === 'h' || k === 'fontSize' || k === 'maxWidth' || k === 'textAlign' || k === 'x' || k === 'y' || k === 'color' || k === 'fill' || k === 'id' || k === 'type') {
        assert.deepEqual((read as unknown as Record<string, unknown>)[k], v, `${String(s.id)}.${k}`)
      }
    }
    assert.equal(read.pageId, MAIN_PAGE)
  }
  // An arrow's x, y is its ends' top-left; a pen stroke's points stay a Y.Array.
  const a1 = readShape('a1', shapes.get('a1'))
  assert.equal(a1?.x, 10); assert.equal(a1?.y, 20)
  assert.ok((shapes.get('p1') as Y.Map<unknown>).get('points') instanceof Y.Array)
  // z-order: each create goes on top of its page.
  const order = readShapes(shapes).sort((a, b) => (a.index < b.index ? -1 : 1)).map(s => s.id)
  assert.deepEqual(order, inputs.map(s => s.id))
})

test('writers refuse what the server refuses', () => {
  const d = doc()
  createShape(d, { id: 'box', type: 'rectangle' })
  const refused: Array<[ShapeInput, string]> = [
    [{ id: 'x', type: 'spaceship' }, 'type'],
    [{ id: 'x', type: 'rectangle', color: 'teal' }, 'color'],
    [{ id: 'x', type: 'rectangle', fill: 'gradient' }, 'fill'],
    [{ id: 'x', type: 'rectangle', textAlign: 'justify' }, 'textAlign'],
    [{ id: 'x', type: 'rectangle', x: Number.NaN }, 'x'],
    [{ id: 'x', type: 'rectangle', w: 'wide' as unknown as number }, 'w'],
    [{ id: 'x', type: 'rectangle', points: [1, 2] }, 'points'],
    [{ id: 'x', type: 'note', fontSize: 12 }, 'fontSize'],
    [{ id: 'x', type: 'draw', points: [1, 2, 3] }, 'points'],
    [{ id: 'x', type: 'draw', points: new Array(4002).fill(1) }, 'points'],
    [{ id: 'x', type: 'arrow', toId: 'nowhere' }, 'toId'],
    [{ id: 'x', type: 'arrow', fromId: 'x' }, 'fromId'],
    [{ id: '', type: 'rectangle' }, 'id'],
    [{ id: 'a'.repeat(129), type: 'rectangle' }, 'id'],
    [{ id: 'bad\nid', type: 'rectangle' }, 'id'],
    [{ id: 'x', type: 'rectangle', locked: 'yes' as unknown as boolean }, 'locked'],
    [{ id: 'x', type: 'rectangle', index: '' }, 'index'],
    [{ id: 'x', type: 'rectangle', createdBy: 'u'.repeat(300) }, 'createdBy']
  ]
  for (const [input, key] of refused) {
    assert.throws(() => createShape(d, input), (e: unknown) => e instanceof SchemaError && e.key === key, `${JSON.stringify(input).slice(0, 80)} refused on ${key}`)
  }
  assert.throws(() => createShape(d, { id: 'box', type: 'ellipse' }), SchemaError, 'an id that exists')
  assert.throws(() => updateShape(d, 'box', { type: 'note' }), SchemaError, 'type changes only within a family')
  assert.throws(() => updateShape(d, 'nope', { x: 1 }), SchemaError)
  assert.deepEqual([...d.getMap('shapes').keys()], ['box'], 'nothing refused was written')
  // What the server normalises, the writers normalise too.
  createShape(d, { id: ' shape:norm ', type: 'rectangle', color: 'Gray', textAlign: 'left', w: -30, x: 1e9 })
  const norm = readShape('norm', d.getMap('shapes').get('norm'))
  assert.equal(norm?.color, 'grey')
  assert.equal(norm?.kind === 'geo' ? norm.textAlign : '', 'start')
  assert.equal(norm?.kind === 'geo' ? norm.w : 0, 30)
  assert.equal(norm?.x, 1e7)
  assert.equal(normalizeShapeId('shape:abc'), 'abc')
  assert.equal(normalizeColor('purple'), 'violet')
  assert.equal(familyOf('hexagon'), 'geo')
  assert.equal(familyOf('frame'), null)
  assert.equal(COLOR_NAMES.length, 13)
  assert.deepEqual([...FILL_NAMES], ['none', 'semi', 'solid', 'pattern'])
})

test('updates write only the keys that change; concurrent edits of two properties both stay', () => {
  const a = doc(); const b = doc()
  createShape(a, { id: 's', type: 'rectangle', x: 0, y: 0, w: 100, h: 100 })
  Y.applyUpdate(b, Y.encodeStateAsUpdate(a))
  const changed: string[][] = []
  a.getMap('shapes').observeDeep(events => { for (const e of events) if (e instanceof Y.YMapEvent) changed.push([...e.keysChanged]) })
  assert.deepEqual(updateShape(a, 's', { x: 0, y: 0, w: 100, color: 'red' }), ['color'])
  assert.deepEqual(changed, [['color']])
  // Two peers edit different properties of one shape at once.
  updateShape(b, 's', { w: 250 })
  const sa = Y.encodeStateAsUpdate(a); const sb = Y.encodeStateAsUpdate(b)
  Y.applyUpdate(a, sb); Y.applyUpdate(b, sa)
  for (const d of [a, b]) {
    const s = readShape('s', d.getMap('shapes').get('s'))
    assert.equal(s?.color, 'red'); assert.equal(s?.kind === 'geo' ? s.w : 0, 250)
  }
  // An arrow moved by x, y moves both ends; new ends move x, y; null removes a binding.
  createShape(a, { id: 'ar', type: 'arrow', x1: 0, y1: 0, x2: 100, y2: 50, fromId: 's' })
  updateShape(a, 'ar', { x: 10, y: 10 })
  let ar = readShape('ar', a.getMap('shapes').get('ar'))
  assert.deepEqual(ar?.kind === 'link' ? [ar.x1, ar.y1, ar.x2, ar.y2, ar.fromId] : [], [10, 10, 110, 60, 's'])
  updateShape(a, 'ar', { x1: -5, fromId: null })
  ar = readShape('ar', a.getMap('shapes').get('ar'))
  assert.deepEqual(ar?.kind === 'link' ? [ar.x, ar.fromId] : [], [-5, null])
  assert.deepEqual(deleteShapes(a, ['ar', 'missing']), ['ar'])
})

test('shapeRecord gives the server\'s defaults', () => {
  assert.deepEqual(shapeRecord({ id: 'r', type: 'rectangle' }), {
    id: 'r', type: 'rectangle', pageId: MAIN_PAGE, x: 0, y: 0, rotation: 0, color: 'black', fill: 'none', note: '', locked: false, w: 100, h: 100, text: '', textAlign: 'middle'
  })
  assert.equal(shapeRecord({ id: 't', type: 'text' }).fontSize, 24)
})

test('pages: written, ordered, renamed, deleted with their shapes; malformed ones skipped', () => {
  const d = doc()
  writePage(d, { id: MAIN_PAGE, name: 'Page 1', index: 'a1' })
  writePage(d, { id: 'page:2', name: 'Second' })
  createShape(d, { id: 'on2', type: 'note', pageId: 'page:2' })
  d.getMap('pages').set('junk', 5)
  assert.deepEqual(readPages(d.getMap('pages')).map(p => [p.id, p.name]), [[MAIN_PAGE, 'Page 1'], ['page:2', 'Second']])
  writePage(d, { id: 'page:2', name: 'Renamed' })
  assert.equal(readPages(d.getMap('pages'))[1]?.name, 'Renamed')
  assert.throws(() => writePage(d, { id: '', name: 'x' }), SchemaError)
  deletePage(d, 'page:2')
  assert.equal(d.getMap('shapes').has('on2'), false)
})

test('server-owned roots read defensively: suggestions, fairies, projects, tasks', () => {
  const d = doc()
  const sugg = d.getMap('suggestions')
  const rec = new Y.Map<unknown>()
  const props = new Y.Map<unknown>()
  props.set('type', 'rectangle'); props.set('x', 5); props.set('points', [1, 'a', 2])
  d.transact(() => {
    rec.set('fairyId', 'f1'); rec.set('requestId', 'r1'); rec.set('op', 'create'); rec.set('shapeId', 'sx'); rec.set('props', props)
    rec.set('status', 'pending'); rec.set('at', 10)
    sugg.set('s-000000000001', rec)
    sugg.set('s-bad', 'garbage')
  })
  const list = readSuggestions(sugg)
  assert.equal(list.length, 1)
  assert.deepEqual(list[0]?.props, { type: 'rectangle', x: 5, points: [1, 2] })
  const fairies = d.getMap('fairies')
  const f = new Y.Map<unknown>()
  const chat = new Y.Array<unknown>()
  d.transact(() => {
    f.set('name', 'Pip'); f.set('chat', chat); fairies.set('f1', f); fairies.set('f2', 12)
    chat.push([{ from: 'user:a', role: 'user', text: 'hi', at: 1, requestId: 'r1' }, 'junk', {
      from: 'fairy:f1', role: 'fairy', text: 'no', acceptance: 'rejected', requestId: 'r1',
      usage: { calls: 1, inputTokens: 20, outputTokens: 3, cacheReadInputTokens: 0, cacheCreationInputTokens: 0, costUsd: 'x' }
    }])
  })
  const chats = readFairyChats(fairies)
  assert.equal(chats.length, 1)
  assert.equal(chats[0]?.chat.length, 2)
  assert.equal(chats[0]?.chat[1]?.rejected, true)
  // A request's usage (the server's, on its last item); a cost that is not a number is left out.
  assert.deepEqual(chats[0]?.chat[1]?.usage, { calls: 1, inputTokens: 20, outputTokens: 3, cacheReadInputTokens: 0, cacheCreationInputTokens: 0 })
  assert.equal(chats[0]?.chat[0]?.usage, undefined)
  d.getMap('projects').set('p1', { title: 'House', members: [{ id: 'f1', role: 'orchestrator' }, 'f2', 7], status: 'active', color: 'blue' })
  const projects = readProjects(d.getMap('projects'))
  assert.deepEqual(projects[0]?.members, ['f1', 'f2'])
  d.getMap('tasks').set('p1/t1', { title: 'Roof', projectId: 'p1', status: 'todo', x: 0, y: 0, w: 10, h: Number.NaN })
  const tasks = readTasks(d.getMap('tasks'), projects)
  assert.equal(tasks[0]?.frame, null, 'a task without finite bounds has no frame')
})
