// What close code a browser-like client sees: Node's `ws` client (the same close handling as a
// browser: the code is only known if the close frame is read before the connection resets).
//
// Usage: node close_codes.mjs URL SCENARIO [RUNS]
//   big   — send one 200 KB binary frame right after the connection opens
//   flood — send y-sync "sync step 1" frames as fast as possible
//   idle  — send nothing and wait (for a token that expires mid-session)
// Prints one line per run: `close CODE`, where CODE is the close event's code (1006 when the
// connection ended without a close frame).
import WebSocket from 'ws'

const [url, scenario, runsArg] = process.argv.slice(2)
const runs = Number(runsArg ?? 1)

function once () {
  return new Promise((resolve) => {
    const ws = new WebSocket(url)
    ws.binaryType = 'nodebuffer'
    const timer = setTimeout(() => { ws.terminate(); resolve(-1) }, 15000)
    ws.on('error', () => {})
    ws.on('close', (code) => { clearTimeout(timer); resolve(code) })
    ws.on('open', () => {
      if (scenario === 'big') {
        ws.send(Buffer.alloc(200 * 1024, 7))
      } else if (scenario === 'flood') {
        // messageSync, syncStep1, a one-byte state vector (no clients)
        const step1 = Buffer.from([0, 0, 1, 0])
        const pump = () => {
          if (ws.readyState !== WebSocket.OPEN) return
          for (let i = 0; i < 50; i++) ws.send(step1)
          setImmediate(pump)
        }
        pump()
      }
    })
  })
}

for (let i = 0; i < runs; i++) {
  const code = await once()
  console.log(`close ${code}`)
}
