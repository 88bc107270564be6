// Unit tests of the project layer in the page, against the document shapes the server writes
// (src/agent/projects/doc.rs: projects `{title, description, plan, orchestratorId, members:
// [{id, role}], color, status}`, tasks under `PROJECT/TASK` with `{id, title, text, projectId,
// assignedTo, status, x, y, w, h, pageId}`): reading them, the projects list rows, the group
// prompt body and label, the group prompt and disband calls, and the words for their refusals.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import * as Y from 'yjs'
import { fairyProjectColor, groupTasks, isLiveProject, readProjects, readTasks } from '@fairyring/client'
import { describeFairyError, FairyApi, FairyApiError, groupPromptBody } from '@fairyring/client'
import { ENDED_SHOWN, groupPromptLabel, projectRows } from '../src/projects.js'
import { swatch } from '@fairyring/client'

/** A room's document as the server leaves it mid-project: a project of three, two tasks. */
function serverDoc (): Y.Doc {
  const doc = new Y.Doc()
  doc.transact(() => {
    const p = new Y.Map<unknown>()
    for (const [k, v] of Object.entries({
      title: 'a house and a tree', description: '', plan: 'a house, a tree side by side', orchestratorId: 'f-o',
      members: [{ id: 'f-o', role: 'orchestrator' }, { id: 'f-a', role: 'drone' }, { id: 'f-b', role: 'drone' }],
      color: 'violet', status: 'active'
    })) p.set(k, v)
    doc.getMap('projects').set('p-0123456789', p)
    const task = (id: string, title: string, assignedTo: string | null, status: string, x: number): void => {
      const t = new Y.Map<unknown>()
      for (const [k, v] of Object.entries({ id, title, text: `draw ${title}`, projectId: 'p-0123456789', assignedTo, status, x, y: 0, w: 500, h: 600, pageId: 'page:main' })) t.set(k, v)
      doc.getMap('tasks').set(`p-0123456789/${id}`, t)
    }
    task('t1', 'a house', 'f-a', 'in-progress', 0)
    task('t2', 'a tree', null, 'todo', 500)
    // A solo task as src/agent/tasks_doc.rs writes it: no project, no bounds yet.
    const solo = new Y.Map<unknown>()
    for (const [k, v] of Object.entries({ id: 't1', title: 'boxes', text: '', projectId: null, assignedTo: 'f-s', status: 'todo', x: 0, y: 0, w: 0, h: 0, pageId: 'page:main' })) solo.set(k, v)
    doc.getMap('tasks').set('f-s/t1', solo)
  })
  return doc
}

test('projects: the server\'s project and task records read as the page needs them', () => {
  const doc = serverDoc()
  const projects = readProjects(doc.getMap('projects'))
  assert.deepEqual(projects, [{
    id: 'p-0123456789', title: 'a house and a tree', color: swatch('violet').solid, members: ['f-o', 'f-a', 'f-b'], orchestratorId: 'f-o', status: 'active'
  }])
  const tasks = readTasks(doc.getMap('tasks'))
  const house = tasks.find(t => t.id === 'p-0123456789/t1')
  assert.deepEqual(house, {
    id: 'p-0123456789/t1', title: 'a house', status: 'in-progress', assignedTo: 'f-a', projectId: 'p-0123456789',
    frame: { id: 'p-0123456789/t1', title: 'a house', status: 'in-progress', assignee: 'f-a', box: { x: 0, y: 0, w: 500, h: 600 } }
  })
  // `assignedTo: null` (not started) reads as nobody; a solo task without bounds has no frame.
  assert.equal(tasks.find(t => t.id === 'p-0123456789/t2')?.assignedTo, '')
  assert.equal(tasks.find(t => t.id === 'f-s/t1')?.frame, null)
  assert.equal(tasks.find(t => t.id === 'f-s/t1')?.projectId, null)
  assert.deepEqual(groupTasks(tasks, projects).map(g => [g.project?.id ?? null, g.tasks.map(t => t.id)]),
    [['p-0123456789', ['p-0123456789/t1', 'p-0123456789/t2']], [null, ['f-s/t1']]])
})

test('projects: only a live project colours its members', () => {
  const doc = serverDoc()
  const live = readProjects(doc.getMap('projects'))
  assert.equal(fairyProjectColor('f-b', null, live), swatch('violet').solid)
  assert.equal(fairyProjectColor('f-b', 'p-0123456789', live), swatch('violet').solid)
  for (const status of ['done', 'aborted']) {
    ;(doc.getMap('projects').get('p-0123456789') as Y.Map<unknown>).set('status', status)
    const ended = readProjects(doc.getMap('projects'))
    assert.equal(fairyProjectColor('f-b', null, ended), null, status)
    assert.equal(fairyProjectColor('f-b', 'p-0123456789', ended), null, status)
  }
  assert.deepEqual(['planning', 'active', 'done', 'aborted', ''].map(isLiveProject), [true, true, false, false, false])
})

test('projects: an aborted project\'s unfinished tasks read as aborted and lose their frames; done ones stay', () => {
  const doc = serverDoc()
  ;(doc.getMap('tasks').get('p-0123456789/t2') as Y.Map<unknown>).set('status', 'done')
  ;(doc.getMap('projects').get('p-0123456789') as Y.Map<unknown>).set('status', 'aborted')
  const projects = readProjects(doc.getMap('projects'))
  const tasks = readTasks(doc.getMap('tasks'), projects)
  const house = tasks.find(t => t.id === 'p-0123456789/t1')
  assert.deepEqual([house?.status, house?.frame], ['aborted', null])
  assert.equal(tasks.find(t => t.id === 'p-0123456789/t2')?.frame?.status, 'done')
  assert.equal(tasks.find(t => t.id === 'f-s/t1')?.status, 'todo')
  // Without the projects (or while it lives), the document's status as written.
  assert.equal(readTasks(doc.getMap('tasks')).find(t => t.id === 'p-0123456789/t1')?.status, 'in-progress')
  assert.deepEqual(projectRows(projects, tasks, new Map()).map(r => [r.status, r.progress, r.live]), [['aborted', '1/2 tasks done', false]])
})

test('projects: list rows name the leader first, count tasks done, and offer disband only while live', () => {
  const doc = serverDoc()
  const names = new Map([['f-o', 'Orla'], ['f-a', 'Dart'], ['f-b', 'Echo']])
  const rows = projectRows(readProjects(doc.getMap('projects')), readTasks(doc.getMap('tasks')), names)
  assert.deepEqual(rows, [{
    id: 'p-0123456789', title: 'a house and a tree', status: 'active', color: swatch('violet').solid,
    members: ['Orla (leads)', 'Dart', 'Echo'], progress: '0/2 tasks done', live: true
  }])
  const ended = Array.from({ length: ENDED_SHOWN + 2 }, (_, i) => ({
    id: `p-${i}`, title: `old ${i}`, color: '#000', members: ['x'], orchestratorId: '', status: i % 2 === 0 ? 'done' : 'aborted'
  }))
  const more = projectRows([...ended, ...readProjects(doc.getMap('projects'))], [], new Map())
  assert.equal(more[0]?.id, 'p-0123456789', 'live projects come first')
  assert.equal(more.length, 1 + ENDED_SHOWN)
  assert.ok(more.slice(1).every(r => !r.live))
  assert.deepEqual(more[1]?.members, ['x (leads)'], 'without orchestratorId the first member leads')
  assert.equal(more[1]?.progress, '')
})

test('projects: the group prompt body, its refusals and the control\'s label', () => {
  const vp = { x: 10.4, y: -3.6, w: 800, h: 600 }
  assert.deepEqual(groupPromptBody(' a house and a tree ', ['f-o', 'f-a', 'f-b', 'f-a'], vp, ['shape:1']), {
    message: 'a house and a tree', bounds: { x: 10, y: -4, w: 800, h: 600 }, selectedShapeIds: ['shape:1'],
    fairyIds: ['f-o', 'f-a', 'f-b'], orchestratorId: 'f-o'
  })
  assert.ok('refused' in groupPromptBody('x', ['f-o'], vp, []))
  assert.ok('refused' in groupPromptBody('x', ['f-o', 'f-o'], vp, []))
  assert.ok('refused' in groupPromptBody('   ', ['f-o', 'f-a'], vp, []))
  assert.equal(groupPromptLabel(['Orla']), null)
  assert.equal(groupPromptLabel([]), null)
  assert.equal(groupPromptLabel(['Orla', 'Dart', 'Echo']), 'Start a project with 3 fairies (Orla leads)')
})

test('projects: group prompt and disband calls; 409 fairy_in_project and 403 scope read clearly', async () => {
  const calls: Array<{ url: string, init: RequestInit | undefined }> = []
  const answers: Response[] = [
    new Response(JSON.stringify({ projectId: 'p-1', orchestratorId: 'f-o', mode: 'orchestrating-active' }), { status: 202 }),
    new Response(JSON.stringify({ error: 'fairy_in_project', detail: 'fairy f-a is in project p-1' }), { status: 409 }),
    new Response(JSON.stringify({ error: 'insufficient_scope', detail: 'fairies' }), { status: 403 }),
    new Response(null, { status: 204 }),
    new Response(JSON.stringify({ error: 'project_not_found', detail: 'p-1' }), { status: 404 }),
    new Response(JSON.stringify({ ok: true }), { status: 202 })
  ]
  const api = new FairyApi('r', () => 'tok', async (url, init) => {
    calls.push({ url: String(url), init })
    const a = answers.shift()
    if (a === undefined) throw new Error('offline')
    return a
  })
  const body = groupPromptBody('a house and a tree', ['f-o', 'f-a', 'f-b'], { x: 0, y: 0, w: 100, h: 100 }, [])
  if ('refused' in body) throw new Error(body.refused)
  assert.deepEqual(await api.groupPrompt(body), { projectId: 'p-1', orchestratorId: 'f-o', mode: 'orchestrating-active' })
  assert.equal(calls[0]?.url, '/rooms/r/group-prompt')
  assert.equal(calls[0]?.init?.method, 'POST')
  // Exactly the fields the server's `GroupPromptBody` accepts (it denies unknown fields).
  assert.deepEqual(Object.keys(JSON.parse(String(calls[0]?.init?.body))).sort(), ['bounds', 'fairyIds', 'message', 'orchestratorId', 'selectedShapeIds'])
  await assert.rejects(api.groupPrompt(body), (e: unknown) => e instanceof FairyApiError && e.status === 409 && e.code === 'fairy_in_project' && /busy in a live project/.test(e.message) && /f-a/.test(e.message))
  await assert.rejects(api.groupPrompt(body), (e: unknown) => e instanceof FairyApiError && /"fairies" scope/.test(e.message))
  await api.disband('p-1')
  assert.equal(calls[3]?.url, '/rooms/r/projects/p-1')
  assert.equal(calls[3]?.init?.method, 'DELETE')
  await assert.rejects(api.disband('p-1'), (e: unknown) => e instanceof FairyApiError && e.message === 'That project is not known any more.')
  await assert.rejects(api.groupPrompt(body), (e: unknown) => e instanceof FairyApiError && e.code === 'bad_answer')
  assert.match(describeFairyError(400, { error: 'invalid_group_prompt', detail: 'at most 32 fairies' }).message, /at most 32 fairies/)
})
