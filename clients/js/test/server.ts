// Starts the real `fairyring serve` for the tests: a free loopback port (`--listen 127.0.0.1:0`,
// the URL read from its `listening on http://ADDR` line), a temporary SQLite store, `--dev` with
// a fixed secret so tokens can be minted with `fairyring token`. The binary is FAIRYRING_BIN, or
// the repository's target/debug/fairyring.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process'
import { createInterface } from 'node:readline'
import { mkdtempSync, rmSync, existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, dirname, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
/** The package root (tests run from `.test-out/test/`). */
export const PACKAGE_ROOT = resolve(here, '..', '..')
export const BIN = process.env.FAIRYRING_BIN ?? resolve(PACKAGE_ROOT, '..', '..', 'target', 'debug', 'fairyring')
const SECRET = 'client-tests-secret-0123456789abcdef'

export interface Server { base: string, child: ChildProcess, dir: string, stop: () => Promise<void>, log: string[] }

export async function startServer (extra: string[] = []): Promise<Server> {
  if (!existsSync(BIN)) throw new Error(`no server binary at ${BIN}: build it (cargo build) or set FAIRYRING_BIN`)
  const dir = mkdtempSync(join(tmpdir(), 'fairyring-client-'))
  const child = spawn(BIN, ['serve', '--listen', '127.0.0.1:0', '--store', `sqlite:${join(dir, 'room.db')}`, '--dev', ...extra], {
    stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, FAIRYRING_JWT_SECRET: SECRET, FAIRYRING_LOG_FORMAT: 'pretty' }
  })
  const log: string[] = []
  child.stderr?.on('data', d => { log.push(String(d)); if (log.length > 200) log.shift() })
  const base = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`server did not print its URL\n${log.join('')}`)) }, 30_000)
    child.once('exit', code => { clearTimeout(timer); reject(new Error(`server exited with ${String(code)}\n${log.join('')}`)) })
    createInterface({ input: child.stdout! }).on('line', line => {
      const m = /listening on (http:\/\/\S+)/.exec(line)
      if (m?.[1] !== undefined) { clearTimeout(timer); child.removeAllListeners('exit'); resolve(m[1].replace(/\/$/, '')) }
    })
  })
  const stop = async (): Promise<void> => {
    if (child.exitCode === null) {
      await new Promise<void>(resolve => {
        const kill = setTimeout(() => child.kill('SIGKILL'), 10_000)
        child.once('exit', () => { clearTimeout(kill); resolve() })
        child.kill('SIGTERM')
      })
    }
    rmSync(dir, { recursive: true, force: true })
  }
  return { base, child, dir, stop, log }
}

/** A token signed with the test server's secret (`fairyring token`). */
export function mintToken (sub: string, scope: string, ttl = '15m'): string {
  return execFileSync(BIN, ['token', '--sub', sub, '--rooms', '*', '--scope', scope, '--ttl', ttl], {
    env: { ...process.env, FAIRYRING_JWT_SECRET: SECRET }, encoding: 'utf8'
  }).trim()
}

/** Waits until `check` holds (polled every 20 ms), failing after `ms`. */
export async function until (what: string, check: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> {
  const end = Date.now() + ms
  for (;;) {
    if (await check()) return
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 20))
  }
}
