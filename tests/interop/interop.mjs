// Drives the official yjs + y-websocket + y-protocols clients against a running fairyring.
// Usage: node interop.mjs ws://HOST ROOM
// Exit code 0 and a last line "interop ok" when every check passed.
import * as Y from 'yjs'
import { until, connect as connectTo } from './clients.mjs'

const [base, room] = process.argv.slice(2)
const connect = (token) => connectTo(base, room, token)

const a = connect(process.env.FAIRYRING_TOKEN)
const b = connect(process.env.FAIRYRING_TOKEN)
await until('a synced', () => a.provider.synced, a.provider, 'sync')
await until('b synced', () => b.provider.synced, b.provider, 'sync')

// 1. History written by the Rust client before we connected arrives through sync step 2.
await until('rust shape in a', () => a.shapes.has('rust1'), a.doc, 'update')
if (a.shapes.get('rust1').get('x') !== 42) throw new Error('rust1.x is not 42')
// Schema roots of a new room (docs/document-schema.md).
if (a.doc.getMap('meta').get('schemaVersion') !== 2) throw new Error('meta.schemaVersion is not 2')
if (!a.doc.getMap('pages').has('page:main')) throw new Error('page:main missing')

// 2. A nested Y.Map shape written by one official client reaches the other live.
const shape = new Y.Map()
a.doc.transact(() => {
  shape.set('id', 'js1'); shape.set('type', 'rectangle'); shape.set('x', 10); shape.set('y', 20)
  a.shapes.set('js1', shape)
})
await until('js1 in b', () => b.shapes.has('js1'), b.doc, 'update')
// Concurrent edits of different properties of the same shape merge.
a.shapes.get('js1').set('x', 11)
b.shapes.get('js1').set('color', 'blue')
await until('merge in a', () => a.shapes.get('js1').get('color') === 'blue', a.doc, 'update')
await until('merge in b', () => b.shapes.get('js1').get('x') === 11, b.doc, 'update')

// 3. Awareness through y-protocols.
a.provider.awareness.setLocalState({ user: { id: 'a', name: 'Ann', color: '#f00' }, cursor: { x: 1, y: 2 } })
await until('a presence in b', () => b.provider.awareness.getStates().get(a.doc.clientID)?.user?.name === 'Ann', b.provider.awareness, 'change')
a.provider.awareness.setLocalState({ user: { id: 'a', name: 'Ann', color: '#f00' }, cursor: { x: 9, y: 9 } })
await until('a cursor in b', () => b.provider.awareness.getStates().get(a.doc.clientID)?.cursor?.x === 9, b.provider.awareness, 'change')

// 4. A disconnecting peer disappears for the others.
a.provider.destroy()
await until('a removed from b', () => !b.provider.awareness.getStates().has(a.doc.clientID), b.provider.awareness, 'change')

// 5. Leave a shape for the Rust client to check, wait until the server has it, and finish.
b.shapes.set('from-js', new Y.Map([['x', 7]]))
const c = connect(process.env.FAIRYRING_TOKEN)
await until('from-js in a fresh client', () => c.shapes.has('from-js'), c.doc, 'update')
b.provider.destroy()
c.provider.destroy()
console.log('interop ok')
process.exit(0)
