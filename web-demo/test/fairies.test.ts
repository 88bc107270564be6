// Unit tests of the fairy layer in the page: reading the fairy roots, merging document and
// awareness, the selection model, sprites (pose, mode, hat, flip, bubble, project colour), the
// glide between awareness updates, prompt bodies and the words for a refused fairy call.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import * as Y from 'yjs'
import { readPeers, readTodo } from '@fairyring/client'
import { fairyProjectColor, groupTasks, projectCss, readChatItem, readFairyChats, readProjects, readTasks } from '@fairyring/client'
import { chatAuthor, chatRole, glide, isIdle, keepPresent, mergeFairies, nextSelection, requestMarks } from '../src/fairies.js'
import { describeFairyError, FairyApi, FairyApiError, promptBody } from '@fairyring/client'
import { ellipsize, renderFairies, renderHat, renderTaskFrames, taskLabel, type FairySprite } from '../src/overlay.js'
import { findNode, textOf } from '../src/vnode.js'
import { swatch } from '@fairyring/client'

const sprite = (over: Partial<FairySprite> = {}): FairySprite => ({
  id: 'f1', name: 'Pip', x: 10, y: 20, mode: 'idling', pose: 'idle', flip: false, hat: 'crown', color: null,
  selected: false, thinking: '', lastMessage: '', ...over
})

test('presence: a fairy state gives pose, flip, project, thought and todo; junk gets defaults', () => {
  const states = new Map<number, unknown>([
    [3, { fairy: { id: 'f1', name: 'Pip', x: 1, y: 2, mode: 'soloing', pose: 'working', flip: true, projectId: 'p1', thinking: 'a roof', lastMessage: 'hi', todo: [{ id: 't', text: 'walls', status: 'done' }, 'junk', { id: 9 }] } }],
    [4, { fairy: { id: 'f2', pose: 'dancing', flip: 'yes', projectId: '', thinking: null, todo: 'x' } }]
  ])
  const { fairies } = readPeers(states, 1)
  const pip = fairies.find(f => f.id === 'f1')
  assert.deepEqual([pip?.pose, pip?.flip, pip?.projectId, pip?.thinking, pip?.lastMessage], ['working', true, 'p1', 'a roof', 'hi'])
  assert.deepEqual(pip?.todo, [{ id: 't', text: 'walls', status: 'done' }])
  const other = fairies.find(f => f.id === 'f2')
  assert.deepEqual([other?.pose, other?.flip, other?.projectId, other?.thinking, other?.todo], ['idle', false, null, '', []])
  assert.equal(readTodo(new Array(80).fill({ text: 'a' })).length, 50)
})

test('fairydoc: chat items keep requestId and rejection; projects give colours; tasks group by project', () => {
  assert.deepEqual(readChatItem({ from: 'fairy:f1', role: 'fairy', text: 'done', at: 5, requestId: 'r1' }),
    { from: 'fairy:f1', role: 'fairy', text: 'done', at: 5, requestId: 'r1', rejected: false })
  assert.equal(readChatItem({ text: 'x', requestId: 'r', acceptance: 'rejected' })?.rejected, true)
  // Only what the server writes marks a rejection.
  assert.equal(readChatItem({ text: 'x', requestId: 'r', rejected: true })?.rejected, false)
  assert.equal(readChatItem(3), null)
  assert.equal(projectCss('blue'), swatch('blue').solid)
  assert.equal(projectCss('#abc'), '#abc')
  assert.equal(projectCss('url(javascript:x)'), null)
  const doc = new Y.Doc()
  doc.transact(() => {
    const p = new Y.Map<unknown>()
    p.set('title', 'House'); p.set('color', 'green'); p.set('status', 'active'); p.set('members', [{ id: 'f1', role: 'orchestrator' }, { id: 'f2', role: 'drone' }])
    doc.getMap('projects').set('p1', p)
    doc.getMap('projects').set('bad', 7)
    const t = new Y.Map<unknown>()
    t.set('title', 'Roof'); t.set('projectId', 'p1'); t.set('assignedTo', 'f2'); t.set('x', 0); t.set('y', 0); t.set('w', 10); t.set('h', 10)
    doc.getMap('tasks').set('t1', t)
    doc.getMap('tasks').set('t2', { title: 'Alone', status: 'done' })
    doc.getMap('tasks').set('t3', { title: 'Orphan', projectId: 'gone' })
    const f = new Y.Map<unknown>()
    f.set('name', 'Pip'); f.set('hat', 'crown')
    doc.getMap('fairies').set('f1', f)
  })
  const projects = readProjects(doc.getMap('projects'))
  assert.deepEqual(projects.map(p => [p.id, p.members]), [['p1', ['f1', 'f2']]])
  assert.equal(fairyProjectColor('f2', null, projects), swatch('green').solid)
  assert.equal(fairyProjectColor('f2', 'p1', projects), swatch('green').solid)
  assert.equal(fairyProjectColor('f9', null, projects), null)
  const tasks = readTasks(doc.getMap('tasks'))
  const groups = groupTasks(tasks, projects)
  assert.deepEqual(groups.map(g => [g.project?.id ?? null, g.tasks.map(t => t.id)]), [['p1', ['t1']], [null, ['t2', 't3']]])
  assert.deepEqual(tasks.find(t => t.id === 't1')?.frame, { id: 't1', title: 'Roof', status: 'todo', assignee: 'f2', box: { x: 0, y: 0, w: 10, h: 10 } })
  assert.equal(readFairyChats(doc.getMap('fairies'))[0]?.hat, 'crown')
})

test('fairies: document and awareness merge; selection clicks and shift-clicks; idle modes', () => {
  const chats = [{ id: 'f1', name: 'Pip', hat: 'crown', chat: [] }, { id: 'f3', name: 'Ash', hat: '', chat: [] }]
  const { fairies: peers } = readPeers(new Map<number, unknown>([[5, { fairy: { id: 'f1', name: 'Pip', mode: 'soloing', pose: 'thinking' } }], [6, { fairy: { id: 'f2', name: 'Zed' } }]]), 1)
  const views = mergeFairies(chats, peers, [])
  assert.deepEqual(views.map(v => [v.id, v.name, v.hat, v.mode, v.present]), [
    ['f3', 'Ash', '', 'idling', false], ['f1', 'Pip', 'crown', 'soloing', true], ['f2', 'Zed', '', 'idling', true]])
  assert.deepEqual(nextSelection([], 'a', false), ['a'])
  assert.deepEqual(nextSelection(['a'], 'b', false), ['b'])
  assert.deepEqual(nextSelection(['a'], 'b', true), ['a', 'b'])
  assert.deepEqual(nextSelection(['a', 'b'], 'a', true), ['b'])
  const sel = ['a', 'b']
  assert.equal(keepPresent(sel, new Set(['a', 'b', 'c'])), sel, 'unchanged selection keeps its identity')
  assert.deepEqual(keepPresent(sel, new Set(['b'])), ['b'])
  assert.equal(isIdle('idling', 'idle'), true)
  assert.equal(isIdle('idling', 'celebrating'), true)
  assert.equal(isIdle('soloing', 'idle'), false)
  assert.equal(isIdle('idling', 'thinking'), false)
})

test('fairies: a sprite glides towards its target, never overshoots, and snaps when close or far', () => {
  let p = { x: 0, y: 0 }
  const target = { x: 100, y: 50 }
  let last = Infinity
  for (let i = 0; i < 30; i++) {
    p = glide(p, target, 16)
    const d = Math.hypot(target.x - p.x, target.y - p.y)
    assert.ok(d < last, 'closer every frame')
    assert.ok(p.x <= 100 && p.y <= 50, 'no overshoot')
    last = d
  }
  assert.ok(last < 1)
  assert.deepEqual(glide({ x: 99.8, y: 50 }, target, 16), target)
  assert.deepEqual(glide({ x: -1e6, y: 0 }, target, 16), target, 'a jump is not a flight')
  assert.deepEqual(glide({ x: Number.NaN, y: 0 }, target, 16), target)
  assert.deepEqual(glide({ x: 0, y: 0 }, target, 0), { x: 0, y: 0 })
})

test('fairies: chat authors and roles', () => {
  const people = new Map([['dev-bob', 'Bob']])
  assert.equal(chatAuthor('user:dev-ada', 'user', 'dev-ada', people, 'Pip'), 'you')
  assert.equal(chatAuthor('user:dev-bob', 'user', 'dev-ada', people, 'Pip'), 'Bob')
  assert.equal(chatAuthor('user:x', 'user', 'dev-ada', people, 'Pip'), 'x')
  assert.equal(chatAuthor('fairy:f1', 'fairy', 'dev-ada', people, 'Pip'), 'Pip')
  assert.equal(chatRole('user', 'user:a'), 'user')
  assert.equal(chatRole('', 'user:a'), 'user')
  assert.equal(chatRole('fairy', 'fairy:f'), 'fairy')
  assert.equal(chatRole('assistant', 'x'), 'fairy')
})

test('fairies: one reject button per request, on its first item; a rejection marks the request', () => {
  const item = (requestId: string | null, rejected = false) => ({ from: 'fairy:f', role: 'fairy', text: 't', at: 0, requestId, rejected })
  const marks = requestMarks([item(null), item('r1'), item('r1'), item('r2'), item('r2', true), item(null)])
  assert.deepEqual([...marks.heads], [1, 3])
  assert.deepEqual([...marks.rejected], ['r2'])
  assert.equal(requestMarks([]).heads.size, 0)
})

test('overlay: sprites carry pose, mode, flip, hat, selection, project colour and a bubble', () => {
  const v = renderFairies([sprite({ pose: 'working', mode: 'soloing', flip: true, selected: true, color: '#099268', lastMessage: 'Drew a house.' })])
  const g = findNode(v, n => n.attrs['data-fairy'] === 'f1')
  assert.ok(g !== null)
  assert.deepEqual([g.attrs['data-pose'], g.attrs['data-mode'], g.attrs['data-flip'], g.attrs['data-selected']], ['working', 'soloing', 'true', 'true'])
  assert.equal(findNode(g, n => n.attrs.class === 'figure')?.attrs.transform, 'scale(-1.5,1.5)')
  assert.ok(findNode(g, n => n.attrs['data-hat'] === 'crown') !== null)
  assert.ok(findNode(g, n => n.attrs.class === 'wand') !== null)
  assert.equal(findNode(g, n => n.attrs.class === 'body')?.attrs.fill, '#099268')
  assert.ok(findNode(g, n => n.attrs.class === 'ring') !== null)
  assert.equal(findNode(g, n => n.attrs['data-bubble'] !== undefined)?.attrs['data-bubble'], 'message')
  assert.ok(textOf(g).includes('Drew a house.'))
  assert.ok(textOf(g).includes('Pip'))
  const thinking = renderFairies([sprite({ pose: 'thinking', thinking: 'where does the roof go', lastMessage: 'old' })])
  assert.equal(findNode(thinking, n => n.attrs['data-bubble'] !== undefined)?.attrs['data-bubble'], 'thinking')
  const quiet = renderFairies([sprite()])
  assert.equal(findNode(quiet, n => n.attrs['data-bubble'] !== undefined), null)
  assert.equal(findNode(quiet, n => n.attrs.class === 'figure')?.attrs.transform, 'scale(1.5)')
  assert.equal(findNode(quiet, n => n.attrs.class === 'body')?.attrs.fill, '#f9a8d4')
  assert.equal(renderHat('no-such-hat').attrs['data-hat'], 'no-such-hat')
  assert.equal(renderHat('').attrs['data-hat'], 'pointy')
  assert.equal(ellipsize('a  b\nc', 10), 'a b c')
  assert.equal(ellipsize('x'.repeat(20), 10), `${'x'.repeat(9)}…`)
})

test('overlay: task frames are data-task with title, assignee and status', () => {
  const frame = { id: 't1', title: 'Roof', status: 'in-progress', assignee: 'f2', box: { x: 0, y: 0, w: 200, h: 100 } }
  const v = renderTaskFrames([frame], 1, new Map([['f2', 'Zed']]))
  const g = findNode(v, n => n.attrs['data-task'] === 't1')
  assert.ok(g !== null)
  assert.equal(textOf(g), 'Roof · Zed · in-progress')
  const label = findNode(v, n => n.tag === 'text')
  const [lx, ly] = [Number(label?.attrs.x), Number(label?.attrs.y)]
  assert.ok(lx > frame.box.x && lx < frame.box.x + frame.box.w && ly > frame.box.y && ly < frame.box.y + frame.box.h, 'the label is inside the frame')
  assert.equal(taskLabel({ ...frame, assignee: '' }), 'Roof · in-progress')
})

test('fairyapi: prompt bodies and refusals in words', () => {
  assert.equal(promptBody('   ', { x: 0, y: 0, w: 1, h: 1 }, []), null)
  assert.deepEqual(promptBody(' draw a house ', { x: 10.4, y: -3.6, w: 800.2, h: Number.NaN }, ['a']),
    { message: 'draw a house', bounds: { x: 10, y: -4, w: 800, h: 1 }, selectedShapeIds: ['a'] })
  const scope = describeFairyError(403, { error: 'insufficient_scope', detail: 'needs fairies' })
  assert.equal(scope.code, 'insufficient_scope')
  assert.match(scope.message, /"fairies" scope/)
  assert.match(describeFairyError(404, { error: 'fairy_not_found' }).message, /no longer/)
  assert.match(describeFairyError(401, null).message, /refused/)
  assert.match(describeFairyError(500, 'x').message, /500/)
  assert.match(describeFairyError(0, null).message, /reach/)
})

test('fairyapi: calls carry the token and map errors', async () => {
  const calls: Array<{ url: string, init: RequestInit | undefined }> = []
  const answers: Response[] = [
    new Response(JSON.stringify({ id: 'f-1' }), { status: 201 }),
    new Response(JSON.stringify({ error: 'insufficient_scope', detail: 'x' }), { status: 403 }),
    new Response(null, { status: 204 })
  ]
  const api = new FairyApi('my room', () => 'tok', async (url, init) => {
    calls.push({ url: String(url), init })
    const a = answers.shift()
    if (a === undefined) throw new Error('offline')
    return a
  })
  assert.equal(await api.invite('  '), 'f-1')
  assert.equal(calls[0]?.url, '/rooms/my%20room/fairies')
  assert.equal(calls[0]?.init?.body, '{}')
  assert.equal((calls[0]?.init?.headers as Record<string, string>).authorization, 'Bearer tok')
  await assert.rejects(api.prompt('f-1', { message: 'hi', bounds: { x: 0, y: 0, w: 1, h: 1 }, selectedShapeIds: [] }),
    (e: unknown) => e instanceof FairyApiError && e.status === 403 && e.code === 'insufficient_scope')
  assert.equal(calls[1]?.url, '/rooms/my%20room/fairies/f-1/prompt')
  await api.dismiss('f-1')
  assert.equal(calls[2]?.init?.method, 'DELETE')
  await assert.rejects(api.revert('f-1', 'r/1'), (e: unknown) => e instanceof FairyApiError && e.status === 0)
  assert.equal(calls[3]?.url, '/rooms/my%20room/fairies/f-1/requests/r%2F1/revert')
})
