// Unit tests of review mode in the page: reading `suggestions` records from a real Yjs document
// (malformed ones skipped), an update's props merged over the current shape, the ghosts of the
// pending records and how they are drawn, what is pending per fairy and request, the apply mode
// toggles, and the review API client with its words for refusals.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import * as Y from 'yjs'
import {
  fairyToggle, ghosts, mergeProps, pendingByFairy, promptApply, proposedShape, readApply, readFairyApply,
  readPropValue, readSuggestion, readSuggestions, requestKey, shapeKeys, tallies, tallyLabel, type Suggestion
} from '@fairyring/client'
import { FAIRY_EDGE, FAIRY_FILL, ghostBox, ghostInk, renderGhostActions, renderGhosts, type GhostLook } from '../src/ghosts.js'
import {
  conflictWords, describeConflicts, describeSuggestionError, readDecided, readRequestAccepted, SuggestApi, SuggestApiError
} from '@fairyring/client'
import { FairyApi } from '@fairyring/client'
import { findNode, textOf, type VNode } from '../src/vnode.js'

function ymap (props: Record<string, unknown>): Y.Map<unknown> {
  const m = new Y.Map<unknown>()
  for (const [k, v] of Object.entries(props)) m.set(k, v)
  return m
}

/** A record as the server writes it: a Y.Map with its props a nested Y.Map. */
function record (doc: Y.Doc, id: string, r: Record<string, unknown>, props: Record<string, unknown> | null = {}): void {
  const m = ymap({ id, status: 'pending', at: 1, promptedBy: 'ada', model: 'offline', ...r })
  if (props !== null) m.set('props', ymap(props))
  doc.getMap('suggestions').set(id, m)
}

function shape (doc: Y.Doc, id: string, props: Record<string, unknown>): void {
  doc.getMap('shapes').set(id, ymap({ id, pageId: 'page:main', ...props }))
}

const current = (doc: Y.Doc) => (id: string) => shapeKeys(doc.getMap('shapes').get(id))

const suggestion = (over: Partial<Suggestion> = {}): Suggestion => ({
  id: 's1', fairyId: 'f1', requestId: 'r1', op: 'create', shapeId: 'box', props: {}, status: 'pending', at: 0,
  decidedBy: null, decidedAt: null, promptedBy: 'ada', model: 'offline', ...over
})

const look = (over: Partial<GhostLook> = {}): GhostLook => ({
  zoom: 1, colors: new Map(), names: new Map([['f1', 'Pip']]), selected: null, hovered: null, busy: new Set(), ...over
})

/** Every node of a tree, depth first. */
function nodes (v: VNode): VNode[] {
  return [v, ...v.children.flatMap(c => (typeof c === 'string' ? [] : nodes(c)))]
}

test('suggestions: a record is read from the document, its props from a nested map', () => {
  const doc = new Y.Doc()
  doc.transact(() => {
    const pts = new Y.Array<number>()
    pts.push([0, 0, 10, 5])
    record(doc, 'sg1', { fairyId: 'f1', requestId: 'r1', op: 'create', shapeId: 'walls', at: 20 },
      { id: 'walls', type: 'rectangle', x: 10, y: 20, w: 200, h: 150, color: 'light-red', fill: 'semi', locked: true })
    record(doc, 'sg2', { fairyId: 'f1', requestId: 'r1', op: 'update', shapeId: 'box', at: 10, status: 'accepted', decidedBy: 'bob', decidedAt: 30 },
      { x: 300, text: null, points: pts })
    record(doc, 'sg3', { fairyId: 'f2', op: 'delete', shapeId: 'box', at: 10 }, null)
  })
  const list = readSuggestions(doc.getMap('suggestions'))
  assert.deepEqual(list.map(s => s.id), ['sg2', 'sg3', 'sg1'], 'oldest first, ties by id')
  const [upd, del, create] = list
  assert.deepEqual(create?.props, { id: 'walls', type: 'rectangle', x: 10, y: 20, w: 200, h: 150, color: 'light-red', fill: 'semi', locked: true })
  assert.deepEqual([create?.op, create?.status, create?.shapeId, create?.fairyId, create?.requestId, create?.model, create?.promptedBy],
    ['create', 'pending', 'walls', 'f1', 'r1', 'offline', 'ada'])
  assert.deepEqual(upd?.props, { x: 300, text: null, points: [0, 0, 10, 5] })
  assert.deepEqual([upd?.status, upd?.decidedBy, upd?.decidedAt], ['accepted', 'bob', 30])
  assert.deepEqual([del?.op, del?.props, del?.requestId, del?.decidedBy], ['delete', {}, '', null])
})

test('suggestions: malformed records are skipped, bad values dropped, never thrown on', () => {
  const doc = new Y.Doc()
  const root = doc.getMap('suggestions')
  doc.transact(() => {
    root.set('junk', 'not a map')
    root.set('num', 7)
    root.set('arr', new Y.Array())
    record(doc, 'badop', { fairyId: 'f1', op: 'move', shapeId: 'a' })
    record(doc, 'badstatus', { fairyId: 'f1', op: 'create', shapeId: 'a', status: 'maybe' })
    record(doc, 'noshape', { fairyId: 'f1', op: 'create' })
    record(doc, 'emptyshape', { fairyId: 'f1', op: 'create', shapeId: '' })
    record(doc, 'nofairy', { op: 'create', shapeId: 'a' })
    record(doc, 'noprops', { fairyId: 'f1', op: 'update', shapeId: 'a' }, null)
    const m = ymap({ fairyId: 'f1', op: 'create', shapeId: 'a', status: 'pending', props: 'x: 1' })
    root.set('stringprops', m)
    const bad = ymap({ fairyId: 'f1', op: 'delete', shapeId: 'a', status: 'pending', props: 3 })
    root.set('delete-with-junk-props', bad)
    record(doc, 'ok', { fairyId: 'f1', op: 'create', shapeId: 'a', id: 'liar', at: 'soon', decidedAt: Number.NaN },
      { x: Number.NaN, y: 5, nested: new Y.Map(), arr: [1, 'two', 3, Infinity], w: undefined, text: 'hi', fill: false })
  })
  const list = readSuggestions(root)
  assert.deepEqual(list.map(s => s.id), ['ok'], 'the key wins over an inner id; every malformed record is skipped')
  assert.deepEqual(list[0]?.props, { y: 5, arr: [1, 3], text: 'hi', fill: false })
  assert.equal(list[0]?.at, 0)
  assert.equal(list[0]?.decidedAt, null)
  assert.equal(readSuggestion('', ymap({ fairyId: 'f', op: 'delete', shapeId: 'a', status: 'pending' })), null)
  assert.equal(readSuggestion('x', null), null)
  assert.deepEqual(readSuggestions('nope'), [])
  assert.deepEqual(readSuggestions(null), [])
  // The JSON form (`GET /rooms/{room}/doc`) reads the same.
  const json = readSuggestions({ s: { fairyId: 'f1', requestId: 'r', op: 'update', shapeId: 'b', status: 'rejected', props: { x: 1 } }, bad: [] })
  assert.deepEqual(json.map(s => [s.id, s.op, s.status, s.props]), [['s', 'update', 'rejected', { x: 1 }]])
  assert.equal(readPropValue({}), undefined)
  assert.equal(readPropValue(null), null)
  assert.deepEqual(readPropValue([1, null, 2, BigInt(3)]), [1, 2, 3])
  assert.equal(readPropValue(BigInt(-40)), -40, 'a 64-bit integer from the server is a number')
  assert.equal(readPropValue(BigInt(2) ** BigInt(60)), undefined)
  assert.equal(readSuggestion('s', { fairyId: 'f', op: 'delete', shapeId: 'a', status: 'pending', at: BigInt(1700000000000) })?.at, 1700000000000)
})

test('suggestions: an update is its props over the current shape; null removes a key', () => {
  const now = { id: 'box', type: 'rectangle', x: 10, y: 20, w: 100, h: 50, color: 'blue', text: 'hi', locked: false }
  const merged = mergeProps(now, { x: 300, color: 'red', text: null })
  assert.deepEqual(merged, { id: 'box', type: 'rectangle', x: 300, y: 20, w: 100, h: 50, color: 'red', locked: false })
  assert.equal(now.x, 10, 'the current keys are left alone')
  const upd = proposedShape(suggestion({ op: 'update', props: { x: 300, w: 40, text: null } }), now)
  assert.equal(upd?.kind, 'geo')
  assert.deepEqual(upd !== null && upd.kind === 'geo' ? [upd.x, upd.y, upd.w, upd.h, upd.color, upd.text] : null, [300, 20, 40, 50, 'blue', ''])
  assert.equal(proposedShape(suggestion({ op: 'update', props: { x: 1 } }), null), null, 'no shape now: nothing to propose')
  const turned = proposedShape(suggestion({ op: 'update', props: { type: 'note' } }), now)
  assert.equal(turned?.kind, 'note')
  const created = proposedShape(suggestion({ op: 'create', shapeId: 'new1', props: { id: 'other', type: 'ellipse', x: 1, y: 2, w: 30, h: 40 } }), null)
  assert.deepEqual(created !== null && created.kind === 'geo' ? [created.id, created.type, created.w] : null, ['new1', 'ellipse', 30])
  const pen = proposedShape(suggestion({ op: 'create', props: { type: 'draw', points: [0, 0, 5, 5] } }), null)
  assert.deepEqual(pen?.kind === 'draw' ? pen.points : null, [0, 0, 5, 5])
  assert.equal(proposedShape(suggestion({ op: 'delete' }), now), null)
  // A shape map's keys are plain data, its points a plain array.
  const doc = new Y.Doc()
  const pts = new Y.Array<number>()
  pts.push([1, 2])
  shape(doc, 'pen', { type: 'draw', points: pts })
  assert.deepEqual(shapeKeys(doc.getMap('shapes').get('pen')), { id: 'pen', pageId: 'page:main', type: 'draw', points: [1, 2] })
  assert.equal(shapeKeys(undefined), null)
  assert.equal(shapeKeys('x'), null)
})

test('suggestions: ghosts are the pending records that have something to show', () => {
  const doc = new Y.Doc()
  doc.transact(() => {
    shape(doc, 'box', { type: 'rectangle', x: 0, y: 0, w: 100, h: 100, color: 'blue' })
    shape(doc, 'taken', { type: 'rectangle', x: 0, y: 0, w: 10, h: 10 })
    record(doc, 'c1', { fairyId: 'f1', requestId: 'r1', op: 'create', shapeId: 'walls', at: 1 }, { type: 'rectangle', x: 5, y: 5, w: 50, h: 50, locked: true })
    record(doc, 'u1', { fairyId: 'f1', requestId: 'r1', op: 'update', shapeId: 'box', at: 2 }, { x: 400 })
    record(doc, 'd1', { fairyId: 'f1', requestId: 'r1', op: 'delete', shapeId: 'box', at: 3 })
    record(doc, 'gone', { fairyId: 'f1', requestId: 'r1', op: 'update', shapeId: 'deleted-by-bob', at: 4 }, { x: 1 })
    record(doc, 'gone2', { fairyId: 'f1', requestId: 'r1', op: 'delete', shapeId: 'deleted-by-bob', at: 5 })
    record(doc, 'taken1', { fairyId: 'f1', requestId: 'r1', op: 'create', shapeId: 'taken', at: 6 }, { type: 'ellipse', x: 50, y: 50, w: 20, h: 20 })
    record(doc, 'page2', { fairyId: 'f1', requestId: 'r1', op: 'create', shapeId: 'p2', at: 7 }, { type: 'rectangle', pageId: 'page:other' })
    record(doc, 'done', { fairyId: 'f1', requestId: 'r1', op: 'create', shapeId: 'x', at: 8, status: 'accepted' }, { type: 'rectangle' })
    record(doc, 'no', { fairyId: 'f1', requestId: 'r1', op: 'create', shapeId: 'y', at: 9, status: 'rejected' }, { type: 'rectangle' })
  })
  const list = ghosts(readSuggestions(doc.getMap('suggestions')), current(doc))
  assert.deepEqual(list.map(g => g.id), ['c1', 'u1', 'd1', 'taken1'])
  const [c1, u1, d1, taken] = list
  assert.deepEqual([c1?.op, c1?.streaming, c1?.proposed?.locked, c1?.current], ['create', true, false, null])
  assert.deepEqual([u1?.proposed?.x, u1?.current?.x, u1?.streaming], [400, 0, false], 'the proposed place beside the current shape')
  assert.deepEqual([d1?.proposed, d1?.current?.id], [null, 'box'])
  assert.deepEqual([taken?.proposed?.type, taken?.current], ['ellipse', null], 'a create whose id was taken still shows (to be rejected)')
  assert.deepEqual(ghostBox(u1!), { x: 400, y: 0, w: 100, h: 100 })
  assert.deepEqual(ghostBox(d1!), { x: 0, y: 0, w: 100, h: 100 })
})

test('suggestions: what is pending per fairy and per request, and how a request reads in the chat', () => {
  const list = [
    suggestion({ id: 'a', fairyId: 'f1', requestId: 'r1' }),
    suggestion({ id: 'b', fairyId: 'f1', requestId: 'r1', status: 'accepted' }),
    suggestion({ id: 'c', fairyId: 'f1', requestId: 'r2', status: 'rejected' }),
    suggestion({ id: 'd', fairyId: 'f2', requestId: 'r1' }),
    suggestion({ id: 'e', fairyId: 'f1', requestId: 'r1' }),
    suggestion({ id: 'f', fairyId: 'f1', requestId: '' })
  ]
  const t = tallies(list)
  assert.deepEqual(t.get(requestKey('f1', 'r1')), { pending: ['a', 'e'], accepted: 1, rejected: 0 })
  assert.deepEqual(t.get(requestKey('f1', 'r2')), { pending: [], accepted: 0, rejected: 1 })
  assert.deepEqual(t.get(requestKey('f2', 'r1')), { pending: ['d'], accepted: 0, rejected: 0 }, 'the same request id of another fairy is another request')
  assert.equal(t.size, 3, 'records of no request are in no tally')
  assert.deepEqual([...pendingByFairy(list)], [['f1', ['a', 'e', 'f']], ['f2', ['d']]])
  assert.equal(tallyLabel({ pending: ['a', 'e'], accepted: 1, rejected: 0 }), '2 suggestions waiting · 1 accepted')
  assert.equal(tallyLabel({ pending: ['a'], accepted: 0, rejected: 0 }), '1 suggestion waiting')
  assert.equal(tallyLabel({ pending: [], accepted: 2, rejected: 1 }), '2 accepted · 1 rejected')
})

test('suggestions: apply modes: the entity default, this browser\'s toggle, the per-prompt choice', () => {
  const doc = new Y.Doc()
  doc.transact(() => {
    doc.getMap('fairies').set('f1', ymap({ name: 'Pip', apply: 'suggest' }))
    doc.getMap('fairies').set('f2', ymap({ name: 'Dart' }))
    doc.getMap('fairies').set('f3', ymap({ name: 'Odd', apply: 'sometimes' }))
    doc.getMap('fairies').set('junk', 4)
  })
  assert.deepEqual([...readFairyApply(doc.getMap('fairies'))], [['f1', 'suggest'], ['f2', 'direct'], ['f3', 'direct']])
  assert.equal(readApply('suggest'), 'suggest')
  assert.equal(readApply(undefined), 'direct')
  assert.equal(fairyToggle(undefined, 'suggest'), 'suggest', 'the entity default')
  assert.equal(fairyToggle('direct', 'suggest'), 'direct', 'what this browser asked for, until the entity shows it')
  assert.equal(fairyToggle(undefined, undefined), 'direct')
  assert.equal(promptApply(null, 'suggest'), 'suggest')
  assert.equal(promptApply('direct', 'suggest'), 'direct')
})

test('ghosts: drawn in the fairy\'s colour, dashed and translucent; ✓ and ✗ on the hovered and selected ones, above all; never as shapes', () => {
  const doc = new Y.Doc()
  doc.transact(() => {
    shape(doc, 'box', { type: 'rectangle', x: 0, y: 0, w: 100, h: 100 })
    record(doc, 'c1', { fairyId: 'f1', requestId: 'r1', op: 'create', shapeId: 'walls' }, { type: 'rectangle', x: 5, y: 5, w: 50, h: 50, color: 'red' })
    record(doc, 'u1', { fairyId: 'f2', requestId: 'r2', op: 'update', shapeId: 'box' }, { x: 400 })
    record(doc, 'u2', { fairyId: 'f1', requestId: 'r1', op: 'update', shapeId: 'box' }, { color: 'red' })
    record(doc, 'd1', { fairyId: 'f1', requestId: 'r1', op: 'delete', shapeId: 'box' })
  })
  const list = ghosts(readSuggestions(doc.getMap('suggestions')), current(doc))
  const tree = renderGhosts(list, look({ colors: new Map([['f2', '#099268']]), selected: 'u1', busy: new Set(['d1']), hovered: 'c1' }))
  const all = nodes(tree)
  assert.equal(all.filter(n => n.attrs['data-shape-id'] !== undefined).length, 0, 'no ghost is taken for a shape')
  assert.equal(all.filter(n => n.attrs['data-fairy'] !== undefined).length, 0, 'nor for a fairy sprite')
  const byId = (id: string): VNode => findNode(tree, n => n.attrs['data-suggestion'] === id && n.attrs['data-op'] !== undefined) ?? assert.fail(`no ghost ${id}`)
  const actions = tree.children.filter((c): c is VNode => typeof c !== 'string' && c.attrs.class === 'ghost-actions')
  assert.deepEqual(actions.map(a => a.attrs['data-suggestion']), ['c1', 'u1'], 'the hovered and the selected ghost, not the busy one')
  assert.equal(tree.children.slice(-2).every(c => typeof c !== 'string' && c.attrs.class === 'ghost-actions'), true, 'buttons are drawn above every ghost')
  const a1 = actions[0]!
  const c1 = byId('c1')
  assert.deepEqual([c1.attrs['data-op'], c1.attrs['data-suggestion-fairy'], c1.attrs['data-request'], c1.attrs['data-hovered']], ['create', 'f1', 'r1', 'true'])
  const frame = findNode(c1, n => n.attrs.class === 'ghost-frame')
  assert.deepEqual([frame?.attrs.stroke, frame?.attrs.fill, frame?.attrs['fill-opacity'], typeof frame?.attrs['stroke-dasharray']],
    [FAIRY_EDGE, FAIRY_FILL, 0.14, 'string'], 'a lone fairy: its pink')
  assert.equal(findNode(c1, n => n.attrs['data-ghost-shape-id'] === 'walls')?.attrs['data-type'], 'rectangle', 'the proposed shape, ghosted')
  assert.equal(findNode(c1, n => n.attrs['data-suggestion-action'] !== undefined), null, 'no buttons inside a ghost')
  assert.match(textOf(findNode(a1, n => n.attrs['data-suggestion-action'] === 'accept')!), /✓/)
  assert.match(textOf(findNode(a1, n => n.attrs['data-suggestion-action'] === 'reject')!), /✗/)
  assert.match(textOf(c1), /Pip suggests: new/)
  const u1 = byId('u1')
  assert.equal(u1.attrs['data-selected'], 'true')
  assert.equal(findNode(u1, n => n.attrs.class === 'ghost-frame')?.attrs.stroke, '#099268', "a project member: the project's colour")
  assert.ok(findNode(u1, n => n.attrs.class === 'ghost-link'), 'a move is linked to where the shape is now')
  assert.match(textOf(u1), /a fairy suggests: change/, 'a fairy the page cannot name')
  assert.equal(findNode(u1, n => n.attrs.class === 'ghost-veil'), null)
  const u2 = byId('u2')
  assert.equal(findNode(u2, n => n.attrs.class === 'ghost-link'), null, 'a change in place is drawn over the shape…')
  assert.ok(findNode(u2, n => n.attrs.class === 'ghost-veil'), '…on a veil')
  const d1 = byId('d1')
  assert.ok(findNode(d1, n => n.attrs.class === 'ghost-cross'), 'a delete crosses the shape out')
  assert.equal(findNode(d1, n => n.attrs['data-ghost-shape-id'] !== undefined), null)
  assert.equal(d1.attrs['data-busy'], 'true')
  assert.deepEqual(ghostInk(null), { stroke: FAIRY_EDGE, fill: FAIRY_FILL })
  // Buttons keep their screen size when zoomed.
  const zoomed = renderGhostActions(list[0]!, 2)
  assert.equal(findNode(zoomed!, n => n.tag === 'circle')?.attrs.r, '5.5')
})

test('ghosts: no record, however broken, stops the renderer', () => {
  const doc = new Y.Doc()
  const junk: unknown[] = [null, 1, 'x', [], {}, new Y.Array(), { op: 'create' }, { op: 'create', shapeId: 's', fairyId: 'f', status: 'pending', props: { type: 42, x: 'far', w: -3, points: 'no' } }]
  doc.transact(() => {
    junk.forEach((j, i) => {
      if (typeof j === 'object' && j !== null && !Array.isArray(j) && !(j instanceof Y.AbstractType)) {
        const m = ymap(j as Record<string, unknown>)
        const props = (j as Record<string, unknown>).props
        if (props !== undefined) m.set('props', ymap(props as Record<string, unknown>))
        doc.getMap('suggestions').set(`j${i}`, m)
      } else {
        doc.getMap('suggestions').set(`j${i}`, j)
      }
    })
    for (const op of ['create', 'update', 'delete']) {
      record(doc, `weird-${op}`, { fairyId: 'f1', op, shapeId: 'box' }, { type: 'draw', points: [1], x: null, text: 5 })
    }
    shape(doc, 'box', { type: 'arrow', x1: 'a' })
  })
  const list = ghosts(readSuggestions(doc.getMap('suggestions')), current(doc))
  assert.ok(list.length >= 3)
  const tree = renderGhosts(list, look({ hovered: list[0]?.id ?? null, selected: list[1]?.id ?? null }))
  assert.equal(nodes(tree).filter(n => n.attrs['data-op'] !== undefined).length, list.length)
  for (const n of nodes(tree)) for (const v of Object.values(n.attrs)) assert.ok(!String(v).includes('NaN'), `no NaN in ${JSON.stringify(n.attrs)}`)
})

test('review API: routes, token, answers and the words for refusals', async () => {
  const calls: Array<{ url: string, init: RequestInit | undefined }> = []
  const answers: Response[] = [
    new Response(JSON.stringify({ status: 'accepted', seq: 12 }), { status: 200 }),
    new Response(JSON.stringify({ error: 'shape_gone', detail: 'the shape was deleted' }), { status: 409 }),
    new Response(JSON.stringify({ accepted: ['a', 7], conflicts: [{ id: 'b', error: 'shape_exists' }, 'junk'], seq: 13 }), { status: 200 }),
    new Response('{}', { status: 200 })
  ]
  const api = new SuggestApi('my room', () => 'tok', async (url, init) => {
    calls.push({ url: String(url), init })
    const a = answers.shift()
    if (a === undefined) throw new Error('offline')
    return a
  })
  assert.deepEqual(await api.decide('s/1', 'accept'), { status: 'accepted', seq: 12 })
  assert.equal(calls[0]?.url, '/rooms/my%20room/suggestions/s%2F1/accept')
  assert.equal(calls[0]?.init?.method, 'POST')
  assert.equal((calls[0]?.init?.headers as Record<string, string>).authorization, 'Bearer tok')
  await assert.rejects(api.decide('s1', 'reject'), (e: unknown) => e instanceof SuggestApiError && e.status === 409 && e.code === 'shape_gone' && /deleted meanwhile/.test(e.message))
  assert.equal(calls[1]?.url, '/rooms/my%20room/suggestions/s1/reject')
  assert.deepEqual(await api.acceptRequest('f1', 'r1'), { accepted: ['a'], conflicts: [{ id: 'b', error: 'shape_exists' }], seq: 13 })
  assert.equal(calls[2]?.url, '/rooms/my%20room/fairies/f1/requests/r1/accept')
  await assert.rejects(api.decide('s1', 'accept'), (e: unknown) => e instanceof SuggestApiError && e.code === 'bad_answer')
  await assert.rejects(api.acceptRequest('f1', 'r1'), (e: unknown) => e instanceof SuggestApiError && e.status === 0)

  assert.match(describeSuggestionError(404, { error: 'suggestion_not_found' }).message, /not known/)
  assert.match(describeSuggestionError(409, { error: 'already_decided' }).message, /already decided/)
  assert.match(describeSuggestionError(409, { error: 'shape_exists' }).message, /can only be rejected/)
  assert.match(describeSuggestionError(403, { error: 'insufficient_scope' }).message, /"write" scope/)
  assert.match(describeSuggestionError(401, null).message, /token was refused/)
  assert.equal(readDecided({ status: 'maybe', seq: 1 }), null)
  assert.equal(readRequestAccepted({ accepted: [], seq: 1 }), null)
  assert.equal(describeConflicts([]), null)
  assert.equal(describeConflicts([{ id: 'a', error: 'shape_gone' }]), '1 suggestion could not be accepted and was rejected: the shape it changes was deleted meanwhile.')
  assert.equal(describeConflicts([{ id: 'a', error: 'shape_gone' }, { id: 'b', error: 'shape_gone' }, { id: 'c', error: 'odd' }]),
    '3 suggestions could not be accepted and were rejected: the shape it changes was deleted meanwhile; the server refused it (odd).')
  assert.equal(conflictWords('already_decided'), 'someone already decided on it')
})

test('fairy API: an invitation sends apply only in suggest mode; prompts carry their apply; a revert names the suggestions it rejected', async () => {
  const bodies: unknown[] = []
  const answers = [
    { id: 'f1' }, { id: 'f2' }, { requestId: 'q1' },
    { reverted: 0, kept: 0, rejectedSuggestions: ['s-1', 2, 's-2'] }, { reverted: 1, kept: 0 }
  ]
  const api = new FairyApi('r', () => null, async (_url, init) => {
    if (init?.body !== undefined) bodies.push(JSON.parse(String(init.body)))
    return new Response(JSON.stringify(answers.shift()), { status: 200 })
  })
  assert.equal(await api.invite('Pip'), 'f1')
  assert.equal(await api.invite('', 'suggest'), 'f2')
  assert.equal(await api.prompt('f1', { message: 'draw a house', apply: 'suggest' }), 'q1')
  assert.deepEqual(bodies, [{ name: 'Pip' }, { apply: 'suggest' }, { message: 'draw a house', apply: 'suggest' }])
  assert.deepEqual(await api.revert('f1', 'q1'), { reverted: 0, kept: 0, rejectedSuggestions: ['s-1', 's-2'] })
  assert.deepEqual(await api.revert('f1', 'q1'), { reverted: 1, kept: 0 })
})
