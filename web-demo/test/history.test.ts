// Unit tests of the History panel's model: reading the history routes' answers, merging pages,
// grouping entries into timeline rows, names and colours as in the People list, the prompt of a
// fairy request from the document, who created and last changed each shape, the bodies of
// restore and rollback, reading a version's shapes, and the API client's requests and refusals.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import * as Y from 'yjs'
import {
  actorColor, actorFromCreatedBy, actorKey, actorName, authorLines, changeSummary, describeRollback,
  FAIRY_COLOR, groupEntries, historyNames, mergeEntries, withHistoryNames, promptIndex, refreshAfter, relativeTime,
  restoreBody, rollbackBody, rowView, SERVER_COLOR, shapeAuthors, type PeopleContext
} from '../src/history.js'
import { describeHistoryError, readActor, readEntry, readHistoryPage, versionShapes, type Actor, type HistoryEntry } from '@fairyring/client'
import { HistoryApi, HistoryApiError } from '@fairyring/client'
import { colorForId } from '@fairyring/client'
import { fairyColors } from '../src/fairies.js'

const user = (id: string, over: Partial<Actor> = {}): Actor => ({
  kind: 'user', id, name: null, requestId: null, promptedBy: null, model: null, projectId: null, taskId: null, via: null, ...over
})
const fairy = (id: string, requestId: string | null, over: Partial<Actor> = {}): Actor => ({
  ...user(id), kind: 'fairy', requestId, promptedBy: 'ada', model: 'offline', ...over
})
const entry = (fromSeq: number, actor: Actor, shapes: Partial<Pick<HistoryEntry, 'added' | 'updated' | 'removed'>> = {}, at = fromSeq * 1000, toSeq = fromSeq): HistoryEntry => ({
  fromSeq, toSeq, at, until: at, actor, added: [], updated: [], removed: [], ...shapes
})
const ctx: PeopleContext = {
  me: { id: 'ada', name: 'Ada', color: '#e03131' },
  users: new Map([['bob', { name: 'Bob', color: '#099268' }]]),
  names: new Map([['f1', 'Pip'], ['ada', 'Ada'], ['bob', 'Bob']]),
  fairyColors: new Map([['f1', '#1c7ed6']])
}

test('history: entries and actors are read defensively; pages sort oldest first', () => {
  const page = readHistoryPage({
    entries: [
      { fromSeq: 5, toSeq: 7, at: 50, until: 70, actor: { kind: 'fairy', id: 'f1', requestId: 'r1', promptedBy: 'ada', model: 'm', projectId: 'p' }, shapes: { added: ['a', 3, ''], updated: 'x' } },
      { fromSeq: 2, at: 20, actor: { kind: 'user', id: 'ada', name: 'Ada', via: 'restore' }, shapes: { removed: ['b'] } },
      { fromSeq: 9, toSeq: 8, actor: { kind: 'user', id: 'x' } },
      { fromSeq: 10, actor: { kind: 'user' } },
      { fromSeq: -1, actor: { kind: 'user', id: 'y' } },
      'junk'
    ],
    next: 7
  })
  assert.deepEqual(page.entries.map(e => [e.fromSeq, e.toSeq]), [[2, 2], [5, 7]])
  const [restore, request] = page.entries
  assert.deepEqual([restore?.actor.via, restore?.actor.name, restore?.removed, restore?.until], ['restore', 'Ada', ['b'], 20])
  assert.deepEqual([request?.added, request?.updated, request?.actor.requestId, request?.actor.projectId, request?.until], [['a'], [], 'r1', 'p', 70])
  assert.equal(page.next, 7)
  assert.deepEqual(readHistoryPage({ entries: [], next: null }), { entries: [], next: null })
  assert.deepEqual(readHistoryPage('nope'), { entries: [], next: null })
  assert.equal(readHistoryPage({ entries: [], next: 'x' }).next, null)
  assert.equal(readActor({ kind: 'server', id: 'server' })?.kind, 'server')
  assert.equal(readEntry({ fromSeq: 1, actor: null }), null)
})

test('history: pages merge; a refresh re-reads the last entry (it may have grown)', () => {
  const a = entry(1, user('ada'))
  const b = entry(2, user('bob'))
  const c = { ...entry(3, user('ada')), toSeq: 4 }
  assert.equal(refreshAfter([]), null)
  assert.equal(refreshAfter([entry(0, user('ada'))]), null)
  assert.equal(refreshAfter([a, b, c]), 2)
  const grown = { ...entry(3, user('ada')), toSeq: 6 }
  const merged = mergeEntries([a, b, c], [grown, entry(7, user('bob'))])
  assert.deepEqual(merged.map(e => [e.fromSeq, e.toSeq]), [[1, 1], [2, 2], [3, 6], [7, 7]])
  assert.deepEqual(mergeEntries([a, b], []), [a, b])
  // A next page (after the known ones) appends.
  assert.deepEqual(mergeEntries([a], [b]).map(e => e.fromSeq), [1, 2])
})

test('history: rows join one fairy request and a person’s close edits; others split them', () => {
  const rows = groupEntries([
    entry(1, user('ada'), { added: ['r1'] }, 1000),
    entry(2, user('ada'), { added: ['r2'], updated: ['r1'] }, 3000),
    entry(3, fairy('f1', 'q1'), { added: ['h1'] }, 4000),
    // The server's chat write in between changes no shape: left out, and it does not split the request.
    entry(4, { ...user('server'), kind: 'server' }, {}, 4100),
    entry(5, fairy('f1', 'q1'), { updated: ['h1'], added: ['h2'] }, 60_000),
    entry(6, fairy('f1', 'q2'), { added: ['t1'] }, 61_000),
    entry(7, user('ada'), { updated: ['r1'] }, 62_000),
    // Long after: a new row for the same person.
    entry(8, user('ada'), { added: ['tmp'] }, 90_000),
    entry(9, user('ada'), { removed: ['tmp', 'r2'] }, 91_000),
    entry(10, user('ada', { via: 'restore' }), {}, 92_000)
  ])
  assert.deepEqual(rows.map(r => [r.actor.kind, r.actor.id, r.fromSeq, r.toSeq, r.entries]), [
    ['user', 'ada', 1, 2, 2], ['fairy', 'f1', 3, 5, 2], ['fairy', 'f1', 6, 6, 1], ['user', 'ada', 7, 7, 1], ['user', 'ada', 8, 9, 2], ['user', 'ada', 10, 10, 1]
  ])
  // Net changes: added then changed counts as added; added then removed counts for nothing.
  assert.deepEqual([rows[0]?.added, rows[0]?.updated], [['r1', 'r2'], []])
  assert.deepEqual([rows[1]?.added, rows[1]?.updated], [['h1', 'h2'], []])
  assert.deepEqual([rows[4]?.added, rows[4]?.removed], [[], ['r2']])
  assert.equal(rows[5]?.actor.via, 'restore')
  assert.notEqual(actorKey(user('ada')), actorKey(user('ada', { via: 'rollback' })))
  assert.notEqual(actorKey(fairy('f1', 'a')), actorKey(fairy('f1', 'b')))
  assert.equal(changeSummary({ added: ['a', 'b'], updated: ['c'], removed: ['d'] }), 'added 2 shapes · changed 1 · removed 1')
  assert.equal(changeSummary({ added: [], updated: ['c'], removed: [] }), 'changed 1 shape')
  assert.equal(changeSummary({ added: [], updated: [], removed: [] }), 'no shape changed')
})

test('history: who created and who last changed each shape', () => {
  const authors = shapeAuthors([
    entry(1, user('ada'), { added: ['a', 'b'] }, 1000),
    entry(2, fairy('f1', 'q1'), { added: ['h'], updated: ['a'] }, 2000),
    entry(3, user('bob'), { updated: ['h'], removed: ['b'] }, 3000),
    // Brought back by a restore: still Ada's.
    entry(4, user('bob', { via: 'restore' }), { added: ['b'] }, 4000),
    entry(5, user('bob'), { removed: ['a'] }, 5000),
    // The same id made anew by someone else: theirs.
    entry(6, user('bob'), { added: ['a'] }, 6000),
    entry(7, user('ada'), { updated: ['old'] }, 7000)
  ])
  const who = (id: string): unknown => {
    const a = authors.get(id)
    return [a?.created?.id ?? null, a?.changed?.id ?? null, a?.changed?.via ?? null]
  }
  assert.deepEqual(who('h'), ['f1', 'bob', null])
  assert.deepEqual(who('b'), ['ada', 'bob', 'restore'])
  assert.deepEqual(who('a'), ['bob', 'bob', null])
  // A shape made before the history kept: no creator known, only its last change.
  assert.deepEqual(who('old'), [null, 'ada', null])
  assert.equal(authors.get('h')?.createdAt, 2000)
  assert.deepEqual(actorFromCreatedBy('user:ada')?.id, 'ada')
  assert.deepEqual(actorFromCreatedBy('fairy:f1')?.kind, 'fairy')
  assert.equal(actorFromCreatedBy('someone'), null)
})

test('history: the hover card names creator and last changer, with createdBy as the fallback', () => {
  const prompts = new Map([['f1\u0000q1', 'draw a house']])
  const authors = shapeAuthors([entry(1, fairy('f1', 'q1'), { added: ['h'] }, 1000), entry(2, user('bob'), { updated: ['h'] }, 50_000)])
  const lines = authorLines('h', 'fairy:f1', authors, ctx, prompts, 110_000)
  assert.equal(lines.created, 'Created by Pip: “draw a house”, 1 min ago')
  assert.equal(lines.changed, 'Last changed by Bob, 1 min ago')
  assert.deepEqual([lines.createdBy?.id, lines.changedBy?.id], ['f1', 'bob'])
  const fallback = authorLines('x', 'user:ada', new Map(), ctx, prompts, 0)
  assert.deepEqual([fallback.created, fallback.changed], ['Created by Ada (you)', null])
  assert.equal(authorLines('y', '', new Map(), ctx, prompts, 0).created, 'Created by someone unknown')
})

test('history: a fairy request’s prompt is its first user chat item with that requestId', () => {
  const doc = new Y.Doc()
  doc.transact(() => {
    const f = new Y.Map<unknown>()
    const chat = new Y.Array<unknown>()
    chat.push([
      { from: 'user:ada', role: 'user', text: 'hello', at: 1 },
      { from: 'user:ada', role: 'user', text: 'draw a house', at: 2, requestId: 'q1' },
      { from: 'fairy:f1', role: 'fairy', text: 'On it!', at: 3, requestId: 'q1' },
      { from: 'user:ada', role: 'user', text: 'take it back', at: 4, requestId: 'q1', acceptance: 'rejected' }
    ])
    const item = new Y.Map<unknown>()
    item.set('role', 'user'); item.set('text', 'a tree'); item.set('requestId', 'q2')
    chat.push([item])
    f.set('chat', chat)
    doc.getMap('fairies').set('f1', f)
    doc.getMap('fairies').set('junk', 3)
  })
  const prompts = promptIndex(doc.getMap('fairies'))
  assert.deepEqual([...prompts], [['f1\u0000q1', 'draw a house'], ['f1\u0000q2', 'a tree']])
  const row = rowView(groupEntries([entry(1, fairy('f1', 'q1'), { added: ['h'] })])[0]!, ctx, prompts)
  assert.deepEqual([row.who, row.prompt, row.detail, row.color, row.kind, row.takeBack], ['Pip', 'draw a house', 'asked by Ada', '#1c7ed6', 'fairy', 'Pip'])
  assert.equal(rowView(groupEntries([entry(1, fairy('f9', 'zz'), { added: ['h'] })])[0]!, ctx, prompts).prompt, null)
})

test('history: names and colours as in the People list', () => {
  assert.equal(actorColor(user('ada'), ctx), '#e03131')
  assert.equal(actorColor(user('bob'), ctx), '#099268')
  assert.equal(actorColor(user('gone'), ctx), colorForId('gone'))
  // A fairy's own colour (its list dot), never the logo's pink; one that left: its id's palette slot.
  assert.equal(actorColor(fairy('f1', null), ctx), '#1c7ed6')
  assert.equal(actorColor(fairy('gone-fairy', null), ctx), fairyColors(['gone-fairy']).get('gone-fairy'))
  assert.notEqual(actorColor(fairy('gone-fairy', null), ctx), FAIRY_COLOR)
  assert.equal(actorColor({ ...user('server'), kind: 'server' }, ctx), SERVER_COLOR)
  assert.equal(actorName(user('bob', { name: 'Robert' }), ctx), 'Robert')
  assert.equal(actorName(user('gone'), ctx), 'gone')
  assert.equal(actorName(fairy('f7a1b2c3d4e5', null), ctx), 'fairy f7a1b2c3')
  assert.equal(actorName({ ...user('server'), kind: 'server' }, ctx), 'the server')
  const mine = rowView(groupEntries([entry(1, user('ada'), { added: ['a'] })])[0]!, ctx, new Map())
  assert.deepEqual([mine.who, mine.you, mine.what, mine.kind], ['Ada', true, 'added 1 shape', 'person'])
  const restore = rowView(groupEntries([entry(1, user('bob', { via: 'restore' }), { removed: ['a'] })])[0]!, ctx, new Map())
  assert.deepEqual([restore.who, restore.you, restore.what], ['Bob', false, 'restored an earlier version (removed 1 shape)'])
  const server = rowView(groupEntries([entry(1, { ...user('server'), kind: 'server' }, { added: ['a'] })])[0]!, ctx, new Map())
  assert.equal(server.takeBack, null)
})

test('history: restore and rollback bodies', () => {
  assert.deepEqual(restoreBody(12), { seq: 12 })
  const [row] = groupEntries([entry(7, fairy('f1', 'q1'), { added: ['h'] }), entry(9, fairy('f1', 'q1'), { added: ['i'] })])
  assert.deepEqual(rollbackBody(row!), { actor: { kind: 'fairy', id: 'f1' }, sinceSeq: 6 })
  assert.deepEqual(rollbackBody({ actor: user('ada'), fromSeq: 0 }), { actor: { kind: 'user', id: 'ada' }, sinceSeq: 0 })
  assert.equal(rollbackBody({ actor: { ...user('server'), kind: 'server' }, fromSeq: 3 }), null)
  assert.equal(describeRollback({ reverted: 3, kept: 1, seq: 20 }, 'Bob'), 'Took back 3 changes by Bob; kept 1 that others changed since.')
  assert.equal(describeRollback({ reverted: 1, kept: 0 }, 'Pip'), 'Took back 1 change by Pip.')
  assert.equal(describeRollback({ reverted: 0, kept: 0 }, 'Pip'), "Nothing of Pip's was left to take back.")
})

test('history: a version’s shapes are read like live ones, main page only, in z-order', () => {
  const v = versionShapes({
    seq: 14,
    doc: {
      shapes: {
        b: { type: 'rectangle', x: 1, y: 2, w: 30, h: 40, index: '82', color: 'blue', createdBy: 'user:ada' },
        a: { type: 'draw', x: 0, y: 0, points: [0, 0, 5, 5, 'x', 1], index: '81' },
        c: { type: 'ellipse', pageId: 'page:other', index: '80' },
        d: 'junk'
      },
      pages: { 'page:main': { name: 'Page 1' } }
    }
  })
  assert.equal(v.seq, 14)
  assert.deepEqual(v.shapes.map(s => s.id), ['a', 'b'])
  const [draw, rect] = v.shapes
  assert.deepEqual(draw?.kind === 'draw' ? draw.points : null, [0, 0, 5, 5])
  assert.deepEqual(rect?.kind === 'geo' ? [rect.w, rect.h, rect.color, rect.createdBy] : null, [30, 40, 'blue', 'user:ada'])
  assert.deepEqual(versionShapes(null), { seq: null, shapes: [] })
})

test('history: refusals in words; relative times', () => {
  assert.match(describeHistoryError(403, { error: 'insufficient_scope', scope: 'write' }).message, /lacks the "write" scope/)
  assert.match(describeHistoryError(401, null).message, /token was refused/)
  assert.match(describeHistoryError(404, { error: 'version_not_found' }).message, /not known/)
  assert.equal(describeHistoryError(400, { error: 'bad_seq', detail: 'seq is in the future' }).message, 'The server refused (400 bad_seq): seq is in the future.')
  assert.equal(describeHistoryError(0, null).message, 'Cannot reach the server.')
  assert.equal(relativeTime(1000, 2000), 'just now')
  assert.equal(relativeTime(0, 42_000), '42 s ago')
  assert.equal(relativeTime(0, 5 * 60_000), '5 min ago')
  assert.equal(relativeTime(0, 3 * 3_600_000), '3 h ago')
  assert.equal(relativeTime(0, 2 * 86_400_000), '2 d ago')
})

test('history api: paths, token, bodies and refusals', async () => {
  const calls: Array<{ url: string, method: string, auth: string | null, body: unknown }> = []
  let answer: { status: number, body: unknown } = { status: 200, body: {} }
  const fake = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const headers = (init?.headers ?? {}) as Record<string, string>
    calls.push({ url: String(input), method: init?.method ?? 'GET', auth: headers.authorization ?? null, body: init?.body !== undefined ? JSON.parse(String(init.body)) : undefined })
    return new Response(JSON.stringify(answer.body), { status: answer.status, headers: { 'content-type': 'application/json' } })
  }) as typeof fetch
  const api = new HistoryApi('my room', () => 'tok', fake)
  answer = { status: 200, body: { entries: [{ fromSeq: 3, toSeq: 4, at: 1, until: 2, actor: { kind: 'user', id: 'ada' }, shapes: { added: ['a'] } }], next: 4 } }
  const page = await api.history(null, 50)
  assert.deepEqual([page.entries.length, page.next], [1, 4])
  await api.history(4, 50)
  answer = { status: 200, body: { seq: 3, doc: { shapes: { a: { type: 'rectangle' } } } } }
  assert.deepEqual((await api.version(3)).shapes.map(s => s.id), ['a'])
  await api.current()
  answer = { status: 200, body: { seq: 9 } }
  assert.equal(await api.restore(3), 9)
  answer = { status: 200, body: { reverted: 2, kept: 0, seq: 10 } }
  assert.deepEqual(await api.rollback({ actor: { kind: 'user', id: 'bob' }, sinceSeq: 2 }), { reverted: 2, kept: 0, seq: 10 })
  assert.deepEqual(calls.map(c => [c.method, c.url]), [
    ['GET', '/rooms/my%20room/history?limit=50'],
    ['GET', '/rooms/my%20room/history?after=4&limit=50'],
    ['GET', '/rooms/my%20room/versions/3'],
    ['GET', '/rooms/my%20room/doc'],
    ['POST', '/rooms/my%20room/restore'],
    ['POST', '/rooms/my%20room/rollback']
  ])
  assert.ok(calls.every(c => c.auth === 'Bearer tok'))
  assert.deepEqual(calls[4]?.body, { seq: 3 })
  assert.deepEqual(calls[5]?.body, { actor: { kind: 'user', id: 'bob' }, sinceSeq: 2 })
  answer = { status: 403, body: { error: 'insufficient_scope', scope: 'write' } }
  await assert.rejects(api.restore(3), (e: unknown) => e instanceof HistoryApiError && e.status === 403 && /write/.test(e.message))
  answer = { status: 404, body: { error: 'room_not_found', detail: "room 'r' has no history" } }
  assert.deepEqual(await api.history(null, 5), { entries: [], next: null })
  answer = { status: 404, body: { error: 'version_not_found' } }
  await assert.rejects(api.version(99), (e: unknown) => e instanceof HistoryApiError && e.code === 'version_not_found')
  const offline = new HistoryApi('r', () => null, (async () => { throw new TypeError('network') }) as typeof fetch)
  await assert.rejects(offline.history(null, 1), (e: unknown) => e instanceof HistoryApiError && e.status === 0)
})

test('history: names of people who left come from the history', () => {
  const learnt = historyNames([entry(1, user('zoe', { name: 'Zoé' })), entry(2, user('bob', { name: 'Old Bob' })), entry(3, fairy('f1', 'q'))])
  assert.deepEqual([...learnt], [['zoe', 'Zoé'], ['bob', 'Old Bob']])
  const c = withHistoryNames(ctx, learnt)
  assert.equal(actorName(user('zoe'), c), 'Zoé')
  // The page's names win over the history's.
  assert.equal(c.names.get('bob'), 'Bob')
  assert.equal(rowView(groupEntries([entry(1, fairy('f1', 'q', { promptedBy: 'zoe' }), { added: ['a'] })])[0]!, c, new Map()).detail, 'asked by Zoé')
  assert.equal(withHistoryNames(ctx, new Map()), ctx)
})

test('history: the server’s own entries inside a fairy request join the request’s row', () => {
  const q = fairy('f1', 'q1')
  const server = { ...user('server'), kind: 'server' }
  const rows = groupEntries([
    entry(1, server, {}, 1000),
    entry(2, user('ada'), { added: ['r1'] }, 1000),
    entry(3, q, { added: ['walls'] }, 2000),
    entry(4, server, { removed: ['walls'] }, 2100),
    entry(5, q, { added: ['roof', 'walls'] }, 2200),
    entry(6, server, { removed: ['roof'] }, 2300),
    entry(7, q, { added: ['roof'] }, 2400),
    // After the request: the server's own row again.
    entry(8, server, { removed: ['r1'] }, 3000),
    entry(9, fairy('f1', 'q2'), { added: ['x'] }, 4000)
  ])
  assert.deepEqual(rows.map(r => [r.actor.kind, r.fromSeq, r.toSeq]), [['user', 2, 2], ['fairy', 3, 7], ['server', 8, 8], ['fairy', 9, 9]])
  assert.deepEqual([rows[1]?.added, rows[1]?.removed, rows[1]?.updated], [['walls', 'roof'], [], []])
  const authors = shapeAuthors([entry(3, q, { added: ['walls'] }), entry(4, server, { removed: ['walls'] }), entry(5, q, { added: ['walls'] })])
  assert.equal(authors.get('walls')?.created?.id, 'f1')
})
