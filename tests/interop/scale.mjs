// Two fairyring nodes sharing a store and Redis: official clients on each converge.
// Usage: node scale.mjs ws://NODE_A ws://NODE_B ROOM
// Exit code 0 and a last line "scale ok" when every check passed.
import * as Y from 'yjs'
import { until, connect } from './clients.mjs'

const [baseA, baseB, room] = process.argv.slice(2)
const a = connect(baseA, room)
const b = connect(baseB, room)
await until('a synced', () => a.provider.synced, a.provider, 'sync')
await until('b synced', () => b.provider.synced, b.provider, 'sync')

// 1. Concurrent edits on both nodes: each client writes 100 shapes, interleaved.
const N = 100
for (let i = 0; i < N; i++) {
  a.shapes.set(`a${i}`, new Y.Map([['x', i]]))
  b.shapes.set(`b${i}`, new Y.Map([['x', i]]))
  if (i % 10 === 0) await new Promise(resolve => setTimeout(resolve, 1))
}
const all = c => [...Array(N).keys()].every(i => c.shapes.has(`a${i}`) && c.shapes.has(`b${i}`))
await until('every shape in a', () => all(a), a.doc, 'update')
await until('every shape in b', () => all(b), b.doc, 'update')

// 2. Concurrent edits of different properties of one shape merge across nodes.
a.shapes.set('both', new Y.Map([['x', 1]]))
await until('both in b', () => b.shapes.has('both'), b.doc, 'update')
a.shapes.get('both').set('x', 2)
b.shapes.get('both').set('color', 'red')
await until('merged in a', () => a.shapes.get('both').get('color') === 'red', a.doc, 'update')
await until('merged in b', () => b.shapes.get('both').get('x') === 2, b.doc, 'update')
const json = c => JSON.stringify(c.shapes.toJSON(), Object.keys(c.shapes.toJSON()).sort())
if (json(a) !== json(b)) throw new Error('replicas differ')

// 3. Awareness across nodes, both ways, and removal on disconnect.
a.provider.awareness.setLocalState({ user: { id: 'a', name: 'Ann', color: '#f00' } })
b.provider.awareness.setLocalState({ user: { id: 'b', name: 'Bob', color: '#00f' } })
await until('Ann seen on node B', () => b.provider.awareness.getStates().get(a.doc.clientID)?.user?.name === 'Ann', b.provider.awareness, 'change')
await until('Bob seen on node A', () => a.provider.awareness.getStates().get(b.doc.clientID)?.user?.name === 'Bob', a.provider.awareness, 'change')
a.provider.destroy()
await until('Ann removed on node B', () => !b.provider.awareness.getStates().has(a.doc.clientID), b.provider.awareness, 'change')
b.provider.destroy()
console.log(`shapes ${a.shapes.size}`)
console.log('scale ok')
process.exit(0)
