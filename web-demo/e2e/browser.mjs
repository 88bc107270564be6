// End-to-end test in a real browser (playwright-core driving Debian's Chromium) against the real
// server binary: two people in one room see each other's drawing, moves and cursors; a third in
// another room sees nothing; the drawing survives a reload and a server restart.
//
// Env: FAIRYRING_BIN (server binary, required), FAIRYRING_ARTIFACTS (screenshot folder),
// CHROMIUM (browser path, default /usr/bin/chromium). Every wait is bounded.
import { chromium } from 'playwright-core'
import { spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createInterface } from 'node:readline'

const BIN = process.env.FAIRYRING_BIN
const ARTIFACTS = process.env.FAIRYRING_ARTIFACTS ?? fileURLToPath(new URL('../../target/web-demo-artifacts', import.meta.url))
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium'
const WAIT = 15_000
const START_WAIT = 60_000

if (!BIN) {
  console.error('FAIRYRING_BIN is not set')
  process.exit(2)
}
mkdirSync(ARTIFACTS, { recursive: true })
const work = mkdtempSync(join(tmpdir(), 'fairyring-e2e-'))
const store = `sqlite:${join(work, 'demo.db')}`

let passed = 0
let failed = 0
const step = async (name, fn) => {
  const t0 = Date.now()
  try {
    await fn()
    passed++
    console.log(`ok - ${name} (${Date.now() - t0} ms)`)
  } catch (e) {
    failed++
    console.log(`not ok - ${name}: ${e instanceof Error ? e.stack : e}`)
    throw e
  }
}

/** Starts `fairyring serve` on a free port; resolves with its base URL from the first stdout line. */
function startServer () {
  const child = spawn(BIN, ['serve', '--listen', '127.0.0.1:0', '--store', store, '--dev'], {
    stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, FAIRYRING_LOG_FORMAT: 'pretty' }
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
function stopServer (server) {
  return new Promise(resolve => {
    if (server.child.exitCode !== null) { resolve(); return }
    const kill = setTimeout(() => server.child.kill('SIGKILL'), 15_000)
    server.child.once('exit', () => { clearTimeout(kill); resolve() })
    server.child.kill('SIGTERM')
  })
}

async function open (browser, base, room, name) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
  const page = await context.newPage()
  page.setDefaultTimeout(WAIT)
  page.on('pageerror', e => console.log(`[${name}] page error: ${e.message}`))
  await page.goto(`${base}/?room=${room}&name=${name}`)
  await page.waitForSelector('#status[data-status="connected"]')
  await page.waitForFunction(() => window.fairyring?.provider?.synced === true)
  return { context, page }
}

const shot = (page, name) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`) })

async function canvasBox (page) {
  const box = await page.locator('#canvas').boundingBox()
  if (box === null) throw new Error('canvas not visible')
  return box
}

/** The shape's box once it is visible (the renderer may replace the element between frames). */
async function shapeBox (page, id) {
  const deadline = Date.now() + WAIT
  while (Date.now() < deadline) {
    const locator = page.locator(`[data-shape-id="${id}"]`)
    await locator.waitFor({ state: 'visible', timeout: Math.max(1, deadline - Date.now()) })
    const box = await locator.boundingBox()
    if (box !== null) return box
  }
  throw new Error(`shape ${id} not visible`)
}

function assert (cond, msg) { if (!cond) throw new Error(msg) }

const browser = await chromium.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--no-first-run', '--disable-quic']
})
let server = null
const room = `e2e-${Date.now().toString(36)}`
let exitCode = 0
try {
  let a, b, shapeId, moved
  await step('the server starts and prints its URL', async () => {
    server = await startServer()
  })
  await step('two browsers join one room', async () => {
    a = await open(browser, server.base, room, 'Alice')
    b = await open(browser, server.base, room, 'Bob')
    await a.page.waitForSelector('[data-person]:has-text("Bob")')
    await b.page.waitForSelector('[data-person]:has-text("Alice")')
    await shot(a.page, '01-alice-joined')
  })

  await step('a rectangle drawn in one appears in the other', async () => {
    const c = await canvasBox(a.page)
    await a.page.click('[data-tool="rectangle"]')
    await a.page.mouse.move(c.x + 200, c.y + 150)
    await a.page.mouse.down()
    await a.page.mouse.move(c.x + 300, c.y + 220, { steps: 5 })
    await a.page.mouse.move(c.x + 360, c.y + 260, { steps: 5 })
    await a.page.mouse.up()
    const el = await a.page.waitForSelector('#layer-shapes [data-shape-id]')
    shapeId = await el.getAttribute('data-shape-id')
    assert(shapeId, 'the new shape has an id')
    await b.page.waitForSelector(`[data-shape-id="${shapeId}"]`)
    const type = await b.page.getAttribute(`[data-shape-id="${shapeId}"]`, 'data-type')
    assert(type === 'rectangle', `Bob sees a rectangle (got ${type})`)
    const ab = await shapeBox(a.page, shapeId)
    const bb = await shapeBox(b.page, shapeId)
    assert(Math.abs(ab.x - bb.x) < 2 && Math.abs(ab.width - bb.width) < 2, 'same place and size in both browsers')
    assert(bb.width > 150 && bb.width < 175, `about 160 px wide (got ${bb.width})`)
    await shot(a.page, '02-alice-drew-rectangle')
    await shot(b.page, '02-bob-sees-rectangle')
  })

  await step('a move in one moves it in the other', async () => {
    const before = await shapeBox(b.page, shapeId)
    const start = await shapeBox(a.page, shapeId)
    const cx = start.x + start.width / 2
    const cy = start.y + start.height / 2
    await a.page.mouse.move(cx, cy)
    await a.page.mouse.down()
    await a.page.mouse.move(cx + 60, cy + 40, { steps: 5 })
    await a.page.mouse.move(cx + 120, cy + 80, { steps: 5 })
    await a.page.mouse.up()
    await b.page.waitForFunction(([id, x0, y0]) => {
      const r = document.querySelector(`[data-shape-id="${id}"]`)?.getBoundingClientRect()
      return r !== undefined && Math.abs(r.x - (x0 + 120)) < 3 && Math.abs(r.y - (y0 + 80)) < 3
    }, [shapeId, before.x, before.y])
    moved = await shapeBox(b.page, shapeId)
    await shot(b.page, '03-bob-sees-move')
  })

  await step("each one's cursor is visible in the other", async () => {
    const ca = await canvasBox(a.page)
    const cb = await canvasBox(b.page)
    await a.page.mouse.move(ca.x + 700, ca.y + 420, { steps: 3 })
    await b.page.mouse.move(cb.x + 500, cb.y + 600, { steps: 3 })
    const aliceId = await a.page.evaluate(() => window.fairyring.provider.awareness.clientID)
    const bobId = await b.page.evaluate(() => window.fairyring.provider.awareness.clientID)
    const inB = await b.page.waitForSelector(`[data-peer="${aliceId}"]`)
    const inA = await a.page.waitForSelector(`[data-peer="${bobId}"]`)
    assert((await inB.textContent()).includes('Alice'), "Alice's cursor is labelled with her name")
    assert((await inA.textContent()).includes('Bob'), "Bob's cursor is labelled with his name")
    await b.page.waitForFunction(([id, x, y]) => {
      const r = document.querySelector(`[data-peer="${id}"]`)?.getBoundingClientRect()
      return r !== undefined && Math.abs(r.x - x) < 3 && Math.abs(r.y - y) < 3
    }, [aliceId, ca.x + 700, ca.y + 420])
    await shot(b.page, '04-bob-sees-alice-cursor')
    await shot(a.page, '04-alice-sees-bob-cursor')
  })

  await step('text edits and recolours travel; undo takes back only your own change', async () => {
    // Bob writes in Alice's rectangle: double-click, type, Ctrl+Enter (one transaction).
    const r = await shapeBox(b.page, shapeId)
    // One double-click (two quick clicks, however busy the machine), then wait until the text
    // box has the keyboard focus: keys typed before that would go to the canvas as tool shortcuts.
    await b.page.mouse.dblclick(r.x + r.width / 2, r.y + r.height / 2)
    await b.page.waitForSelector('#text-editor:not([hidden])')
    await b.page.waitForFunction(() => document.activeElement?.id === 'text-editor')
    await b.page.keyboard.type('hello fairies')
    await b.page.keyboard.press('Control+Enter')
    // Wrapped into one tspan per line, so look for each word.
    await a.page.waitForSelector(`[data-shape-id="${shapeId}"] text:has-text("hello"):has-text("fairies")`)
    const textInA = await a.page.evaluate(id => window.fairyring.doc.getMap('shapes').get(id)?.get('text'), shapeId)
    assert(textInA === 'hello fairies', `Alice's document has Bob's text (got ${textInA})`)
    // Alice draws an ellipse, recolours it red, then undoes the recolour and the ellipse.
    const c = await canvasBox(a.page)
    await a.page.click('[data-tool="ellipse"]')
    await a.page.mouse.move(c.x + 600, c.y + 150)
    await a.page.mouse.down()
    await a.page.mouse.move(c.x + 700, c.y + 230, { steps: 4 })
    await a.page.mouse.up()
    const ellipse = await a.page.evaluate(() => window.fairyring.canvas.selection[0])
    await b.page.waitForSelector(`[data-shape-id="${ellipse}"][data-type="ellipse"]`)
    await a.page.click('[data-color="red"]')
    await b.page.waitForSelector(`[data-shape-id="${ellipse}"] path[stroke="#e03131"]`)
    await shot(b.page, '05-bob-sees-text-and-red-ellipse')
    await a.page.keyboard.press('Control+z')
    await b.page.waitForSelector(`[data-shape-id="${ellipse}"] path[stroke="#1d1d1d"]`)
    await a.page.keyboard.press('Control+z')
    await b.page.waitForSelector(`[data-shape-id="${ellipse}"]`, { state: 'detached' })
    // Bob's text (not Alice's change) survives Alice's undo.
    const text = await b.page.evaluate(id => window.fairyring.doc.getMap('shapes').get(id)?.get('text'), shapeId)
    assert(text === 'hello fairies', `Bob's text is kept (got ${text})`)
    assert(await a.page.locator(`[data-shape-id="${shapeId}"]`).count() === 1, "Alice's rectangle (an older change) is kept")
  })

  await step('zooming changes only your own view', async () => {
    const before = await shapeBox(a.page, shapeId)
    const inB = await shapeBox(b.page, shapeId)
    await a.page.click('[data-action="zoom-in"]')
    await a.page.waitForFunction(([id, w]) => {
      const r = document.querySelector(`[data-shape-id="${id}"]`)?.getBoundingClientRect()
      // 1.25× the geometry (the stroke may or may not be counted in the box: allow for it).
      return r !== undefined && r.width > w * 1.18 && r.width < w * 1.32
    }, [shapeId, before.width])
    const after = await shapeBox(b.page, shapeId)
    assert(Math.abs(after.width - inB.width) < 1, "Bob's view is unchanged")
    await a.page.click('[data-action="zoom-reset"]')
  })

  await step('a third browser in another room sees nothing', async () => {
    const c = await open(browser, server.base, `${room}-other`, 'Carol')
    const cc = await canvasBox(c.page)
    await c.page.mouse.move(cc.x + 100, cc.y + 100)
    // Our own presence round trip proves the room is live before we check it is empty.
    const shapes = await c.page.locator('[data-shape-id]').count()
    const cursors = await c.page.locator('[data-peer]').count()
    const people = await c.page.locator('[data-person]').count()
    assert(shapes === 0, `Carol sees no shapes (got ${shapes})`)
    assert(cursors === 0, `Carol sees no cursors (got ${cursors})`)
    assert(people === 1, `Carol is alone (got ${people})`)
    const carolInA = await a.page.locator('[data-person]:has-text("Carol")').count()
    assert(carolInA === 0, 'Alice does not see Carol')
    await shot(c.page, '06-carol-other-room-empty')
    await c.context.close()
  })

  await step('reload keeps the drawing', async () => {
    await b.page.reload()
    await b.page.waitForSelector('#status[data-status="connected"]')
    await b.page.waitForFunction(() => window.fairyring?.provider?.synced === true)
    await b.page.waitForSelector(`[data-shape-id="${shapeId}"]`)
    const box = await shapeBox(b.page, shapeId)
    assert(Math.abs(box.x - moved.x) < 3 && Math.abs(box.y - moved.y) < 3, 'at the moved position')
    await shot(b.page, '07-bob-after-reload')
  })

  await step('a server restart keeps the drawing (persisted in SQLite)', async () => {
    await a.context.close()
    await b.context.close()
    await stopServer(server)
    server = null
    server = await startServer()
    const d = await open(browser, server.base, room, 'Dora')
    await d.page.waitForSelector(`[data-shape-id="${shapeId}"]`)
    const box = await shapeBox(d.page, shapeId)
    assert(Math.abs(box.x - moved.x) < 3 && Math.abs(box.y - moved.y) < 3, 'at the moved position after restart')
    const createdBy = await d.page.evaluate(id => window.fairyring.doc.getMap('shapes').get(id)?.get('createdBy'), shapeId)
    assert(typeof createdBy === 'string' && createdBy.startsWith('user:'), `createdBy is user:SUB (got ${createdBy})`)
    await shot(d.page, '08-after-server-restart')
    await d.context.close()
  })
} catch {
  exitCode = 1
} finally {
  await browser.close().catch(() => {})
  if (server !== null) await stopServer(server).catch(() => {})
  rmSync(work, { recursive: true, force: true })
}
console.log(`screenshots: ${ARTIFACTS}`)
console.log(`${passed} passed, ${failed} failed`)
process.exit(exitCode)
