// An official yjs + y-websocket client watching REST writes (tests/http/rest.rs).
// Usage: node rest.mjs ws://HOST ROOM TOKEN
// Prints "synced" once synced, then waits for the shape `from-update` (x = 5, written by
// POST …/update) and the shape `from-patch` (color blue, written by PATCH …/shapes), and
// prints "rest ok".
import { until, connect } from './clients.mjs'

const [base, room, token] = process.argv.slice(2)
const peer = connect(base, room, token)
await until('synced', () => peer.provider.synced, peer.provider, 'sync')
console.log('synced')
await until('from-update', () => peer.shapes.get('from-update')?.get('x') === 5, peer.doc, 'update')
await until('from-patch', () => peer.shapes.get('from-patch')?.get('color') === 'blue', peer.doc, 'update')
peer.provider.destroy()
console.log('rest ok')
process.exit(0)
