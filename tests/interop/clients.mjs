// Shared helpers of the interop scripts: official y-websocket clients under Node and a
// bounded wait on their events.
import * as Y from 'yjs'
import { WebsocketProvider } from 'y-websocket'
import WebSocket from 'ws'

const deadline = (ms, what) => new Promise((_, reject) => setTimeout(() => reject(new Error(`timed out: ${what}`)), ms))

// Resolves once cond() holds, re-checking on each `event` of `emitter`; rejects after 10 s.
export const until = (what, cond, emitter, event) => Promise.race([
  new Promise(resolve => {
    const check = () => { if (cond()) { emitter.off(event, check); resolve() } }
    emitter.on(event, check)
    check()
  }),
  deadline(10000, what)
])

// An official client of ROOM at BASE (ws://HOST), optionally with a token.
export const connect = (base, room, token) => {
  const doc = new Y.Doc()
  const provider = new WebsocketProvider(`${base}/rooms`, room, doc, {
    WebSocketPolyfill: WebSocket,
    params: token ? { token } : {},
    disableBc: true
  })
  return { doc, provider, shapes: doc.getMap('shapes') }
}
