// The fairyring server the web demo's browser scripts (browser.mjs, firstminutes.mjs) run
// against: started as a child process of the real binary, stopped gracefully. Owns nothing
// else: each script keeps its own pages, checks and store.
import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'

/** How long the server may take to print its URL. */
const START_WAIT = 60_000

/**
 * Starts `BIN serve --listen LISTEN --store STORE --dev ...extraArgs` signing with `secret`;
 * resolves with `{ child, base, log }` once it prints `listening on URL` (its first stdout line).
 */
export function startServer ({ bin, store, secret, listen = '127.0.0.1:0', extraArgs = [] }) {
  const child = spawn(bin, ['serve', '--listen', listen, '--store', store, '--dev', ...extraArgs], {
    stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, FAIRYRING_LOG_FORMAT: 'pretty', FAIRYRING_JWT_SECRET: secret }
  })
  const log = []
  child.stderr.on('data', d => { log.push(String(d)); if (log.length > 200) log.shift() })
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`server did not print its URL in ${START_WAIT} ms\n${log.join('')}`)) }, START_WAIT)
    child.on('exit', code => { clearTimeout(timer); reject(new Error(`server exited with ${code} before listening\n${log.join('')}`)) })
    createInterface({ input: child.stdout }).on('line', line => {
      const m = /listening on (http:\/\/[^\s]+)/.exec(line)
      if (m) {
        clearTimeout(timer)
        child.removeAllListeners('exit')
        resolve({ child, base: m[1].replace(/\/$/, ''), log })
      }
    })
  })
}

/** Stops the server (SIGTERM, then SIGKILL after 15 s) and waits for it to exit. */
export function stopServer (server) {
  return new Promise(resolve => {
    if (server.child.exitCode !== null) { resolve(); return }
    const kill = setTimeout(() => server.child.kill('SIGKILL'), 15_000)
    server.child.once('exit', () => { clearTimeout(kill); resolve() })
    server.child.kill('SIGTERM')
  })
}
