// The HTTP API client against the real server: every operation of the committed
// openapi.json has a method (and the served description is the committed one), and each method
// is called against `fairyring serve` here, a recording wrapper checking that none was left out.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import * as Y from 'yjs'
import WebSocket from 'ws'
import { ApiError, FairyringApi, OPERATIONS, createShape, readShapeJson, shapeRecord, fetchDevToken, FairyApi, SuggestApi, HistoryApi } from '../src/index.js'
import { PACKAGE_ROOT, startServer, mintToken, until, type Server } from './server.js'

let server: Server
const committed = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'openapi.json'), 'utf8')) as { paths: Record<string, Record<string, { operationId: string }>> }
const operationIds = Object.values(committed.paths).flatMap(p => Object.values(p).map(o => o.operationId)).sort()

before(async () => { server = await startServer(['--llm-pace-ms', '5']) })
after(async () => { await server?.stop() })

/** A client whose every method call is recorded by name. */
function recording (api: FairyringApi, called: Set<string>): FairyringApi {
  return new Proxy(api, {
    get (target, prop, receiver) {
      const v: unknown = Reflect.get(target, prop, receiver)
      if (typeof v !== 'function' || typeof prop !== 'string') return v
      return (...args: unknown[]) => { called.add(prop); return (v as (...a: unknown[]) => unknown).apply(target, args) }
    }
  })
}

test('every operation of openapi.json has a method, and the server serves that description', async () => {
  assert.deepEqual(Object.keys(OPERATIONS).sort(), operationIds)
  const api = new FairyringApi({ baseUrl: server.base })
  for (const method of Object.values(OPERATIONS)) assert.equal(typeof api[method], 'function', method)
  const served = await api.openapi() as typeof committed
  const servedIds = Object.values(served.paths).flatMap(p => Object.values(p).map(o => o.operationId)).sort()
  assert.deepEqual(servedIds, operationIds)
})

test('each operation against the real server', { timeout: 120_000 }, async () => {
  const called = new Set<string>()
  const token = mintToken('alice', 'admin')
  const api = recording(new FairyringApi({ baseUrl: server.base, token: () => token }), called)
  const room = 'api-all'

  assert.equal((await api.health()).status !== undefined, true)
  await api.openapi()
  assert.match(await api.metrics(), /fairyring_/)
  const dev = await api.devToken({ name: 'Ada' })
  assert.equal(typeof dev.token, 'string')

  // REST writes: a patch, and a Yjs update made with this package's writers.
  const patched = await api.patchShapes(room, { create: [{ id: 'box1', type: 'rectangle', x: 10, y: 20, w: 100, h: 50, color: 'blue' }] })
  assert.deepEqual(patched.created, ['box1'])
  const local = new Y.Doc()
  Y.applyUpdate(local, await api.roomDocUpdate(room))
  const sv = Y.encodeStateVector(local)
  createShape(local, { id: 'note1', type: 'note', x: 300, y: 40, text: 'from a Yjs update' })
  const seq = (await api.applyUpdate(room, Y.encodeStateAsUpdate(local, sv))).seq
  const doc = await api.roomDoc(room)
  const shapes = doc.doc.shapes ?? {}
  assert.equal(readShapeJson('note1', shapes.note1)?.kind, 'note')
  // The server's defaults for a created shape are the package's.
  const server1 = { ...(shapes.box1 as Record<string, unknown>) }
  const mine: Record<string, unknown> = shapeRecord({ id: 'box1', type: 'rectangle', x: 10, y: 20, w: 100, h: 50, color: 'blue' })
  for (const k of ['index', 'createdBy']) { delete server1[k]; delete mine[k] }
  assert.deepEqual(server1, mine)
  // A patch the schema refuses is refused by the server too, as a typed error.
  await assert.rejects(api.patchShapes(room, { create: [{ id: 'bad', type: 'rectangle', color: 'teal' }] }),
    (e: unknown) => e instanceof ApiError && e.status === 400 && e.code === 'invalid_patch')

  // History.
  const page = await api.roomHistory(room, { limit: 10 })
  assert.ok(page.entries.length >= 2)
  assert.ok((await api.versionAt(room, Date.now())).seq >= seq)
  assert.ok('shapes' in (await api.version(room, seq)).doc)
  const bytes = await api.versionBytes(room, seq, 'yjs')
  assert.ok(bytes.length > 0)
  const restored = await api.restore(room, { seq: patched.seq })
  assert.ok(restored.seq > seq)
  const rolled = await api.rollback(room, { actor: { kind: 'user', id: 'alice' }, sinceSeq: 0 })
  assert.equal(typeof rolled.reverted, 'number')
  await api.patchShapes(room, { create: [{ id: 'box2', type: 'ellipse', x: 0, y: 0, w: 40, h: 40 }] })

  // Exports.
  assert.match(await api.exportSvg(room), /<svg/)
  const png = await api.exportPng(room, { scale: 0.5 })
  assert.deepEqual([...png.slice(1, 4)], [0x50, 0x4e, 0x47])
  const jpg = await api.exportJpg(room)
  assert.deepEqual([...jpg.slice(0, 2)], [0xff, 0xd8])

  // Instructions.
  await api.writeInstructions(room, 'Draw in pastel colours.')
  assert.equal(await api.readInstructions(room), 'Draw in pastel colours.')
  const usage = await api.roomUsage(room)
  assert.equal(typeof usage.budgets.roomPerHour, 'number')
  assert.equal(typeof usage.you, 'object')

  // Fairies: invite, prompt, watch its events, history, revert, dismiss.
  const fairy = await api.inviteFairy(room, { name: 'Pip' })
  assert.ok((await api.listFairies(room)).fairies.some(f => f.id === fairy.id))
  const abort = new AbortController()
  const events: string[] = []
  const watching = (async () => {
    try {
      for await (const ev of api.fairyEvents(room, fairy.id, abort.signal)) {
        events.push(ev.event)
        if (ev.event === 'request-ended') break
      }
    } catch (e) { if (!abort.signal.aborted) throw e }
  })()
  // The stream is open before the prompt (its first bytes are the server's).
  await until('the event stream to open', () => true)
  const accepted = await api.promptFairy(room, fairy.id, { message: 'draw a house', bounds: { x: 0, y: 0, w: 800, h: 600 } })
  await watching
  assert.ok(events.includes('request-ended'), `events: ${events.join(',')}`)
  const hist = await api.fairyHistory(room, fairy.id)
  assert.ok(hist.history.length > 0)
  const reverted = await api.revertRequest(room, fairy.id, accepted.requestId)
  assert.ok(reverted.reverted > 0)
  assert.equal(typeof (await api.cancelFairy(room, fairy.id)).status, 'string')
  assert.equal((await api.updateFairy(room, fairy.id, { apply: 'suggest' })).apply, 'suggest')

  // Review mode: suggestions accepted, rejected, and a request accepted whole.
  const sroom = 'api-review'
  const reviewer = await api.inviteFairy(sroom, { name: 'Rue', apply: 'suggest' })
  const conn = api.joinRoom(sroom, { WebSocket })
  await conn.whenSynced()
  const pending = (): string[] => {
    const out: string[] = []
    conn.doc.getMap('suggestions').forEach((v, k) => { if (v instanceof Y.Map && v.get('status') === 'pending' && v.get('requestId') !== undefined) out.push(k) })
    return out
  }
  const req = await api.promptFairy(sroom, reviewer.id, { message: 'draw a house', bounds: { x: 0, y: 0, w: 800, h: 600 } })
  await until('suggestions', () => pending().length >= 3)
  const [first, second] = pending()
  assert.equal((await api.acceptSuggestion(sroom, first!)).status, 'accepted')
  assert.equal((await api.rejectSuggestion(sroom, second!)).status, 'rejected')
  await until('the fairy to finish', async () => (await api.fairyHistory(sroom, reviewer.id)).mode === 'idling')
  const whole = await api.acceptRequest(sroom, reviewer.id, req.requestId)
  assert.ok(whole.accepted.length >= 1)
  conn.destroy()

  // Projects.
  const a = await api.inviteFairy(room, { name: 'Ana' })
  const b = await api.inviteFairy(room, { name: 'Bo' })
  const project = await api.groupPrompt(room, { message: 'a house and a tree', fairyIds: [a.id, b.id], orchestratorId: a.id, bounds: { x: 0, y: 0, w: 800, h: 600 } })
  assert.equal(typeof project.projectId, 'string')
  await api.disbandProject(room, project.projectId)
  await api.dismissFairy(room, fairy.id)
  assert.ok(!(await api.listFairies(room)).fairies.some(f => f.id === fairy.id))

  // The WebSocket route: joinRoom opened a room above; one more to see the REST shapes live.
  const live = api.joinRoom(room, { WebSocket })
  await live.whenSynced()
  assert.ok(live.doc.getMap('shapes').has('box2'))
  live.destroy()

  assert.deepEqual([...new Set(Object.values(OPERATIONS))].filter(m => !called.has(m)), [], 'every operation was called')
})

test('refusals are typed errors with the server\'s code; the demo\'s wrappers keep their words', async () => {
  const readOnly = new FairyringApi({ baseUrl: server.base, token: () => mintToken('reader', 'read') })
  await assert.rejects(readOnly.inviteFairy('r1'), (e: unknown) => e instanceof ApiError && e.status === 403 && e.code === 'insufficient_scope')
  const none = new FairyringApi({ baseUrl: `${server.base}/` })
  await assert.rejects(none.listFairies('r1'), (e: unknown) => e instanceof ApiError && e.status === 401)
  const dev = await fetchDevToken('Ada', undefined, server.base)
  assert.ok(dev !== null && dev.expiresAt !== null)
  const fairies = new FairyApi('r1', () => dev.token, undefined, server.base)
  const id = await fairies.invite('Pip')
  await assert.rejects(fairies.revert(id, 'no-such-request'), (e: unknown) => e instanceof ApiError && /not known/.test(e.message))
  const review = new SuggestApi('r1', () => dev.token, undefined, server.base)
  await assert.rejects(review.decide('s-000000000000', 'accept'), (e: unknown) => e instanceof ApiError && e.status === 404)
  const history = new HistoryApi('never-written', () => dev.token, undefined, server.base)
  assert.deepEqual(await history.history(null, 10), { entries: [], next: null })
})
