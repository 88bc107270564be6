// End-to-end test in a real browser (playwright-core driving Debian's Chromium) against the real
// server binary: two people in one room see each other's drawing, moves and cursors; one invites
// a fairy from the page, both see its sprite, one prompts it and both see the house and the
// whole conversation while the other draws a rectangle, one stops it, rejects the house (it
// disappears in both, the rectangle stays); she invites two more, selects the three and starts a
// project ("a house and a tree") from the group prompt control: both see the task frames, the
// drones draw, the frames and the project end done and the three are idle again; a second
// project's busy fairies are refused clearly and Bob disbands it from the projects list; she
// dismisses the fairy; in a room of their own, Hana and Gus draw and a fairy draws a house: the
// History panel lists who did what (names, People-list colours, the fairy's prompt), hovering a
// shape names who made and last changed it, an entry previews the canvas as it was, Restore
// brings that version back and a take-back removes what Gus did since, keeping Hana's later move;
// in another room, Rita invites a fairy in suggest mode and it draws a house as suggestions: both
// she and Sam see the ghosts and nothing enters the shapes; ✓ on one makes it a shape in both, ✗
// on another drops it, *Accept all* takes the rest; with a box selected, "move it right" shows
// an update beside the box and "delete it" a crossed-out box, ✓ moves the box, ✗ keeps the other; a token without the `fairies` scope gets a
// clear message; a third in another room sees nothing; the drawing survives a reload and a
// server restart; no page logs a console error on load.
//
// Env: FAIRYRING_BIN (server binary, required), FAIRYRING_ARTIFACTS (screenshot folder),
// CHROMIUM (browser path, default /usr/bin/chromium). Every wait is bounded.
import { chromium } from 'playwright-core'
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startServer, stopServer } from './server.mjs'

const BIN = process.env.FAIRYRING_BIN
const ARTIFACTS = process.env.FAIRYRING_ARTIFACTS ?? fileURLToPath(new URL('../../target/web-demo-artifacts', import.meta.url))
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium'
const WAIT = 15_000

if (!BIN) {
  console.error('FAIRYRING_BIN is not set')
  process.exit(2)
}
mkdirSync(ARTIFACTS, { recursive: true })
const work = mkdtempSync(join(tmpdir(), 'fairyring-e2e-'))
const store = `sqlite:${join(work, 'demo.db')}`
// A known signing secret, so the test can mint a token without the `fairies` scope.
const SECRET = randomBytes(24).toString('hex')

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
    // The server's last log lines (its stderr, kept by startServer), for a failure on a machine
    // where the run cannot be repeated.
    const log = (server?.log ?? []).join('').split('\n').slice(-60).join('\n')
    if (log.trim() !== '') console.log(`# the server's last log lines:\n${log}`)
    throw e
  }
}


/** Opens the demo; `errors` collects console errors and failed requests (none are allowed on load). */
async function open (browser, base, room, name, extra = '', viewport = { width: 1280, height: 800 }) {
  const context = await browser.newContext({ viewport })
  const page = await context.newPage()
  page.setDefaultTimeout(WAIT)
  const errors = []
  page.on('pageerror', e => { errors.push(`page error: ${e.message}`); console.log(`[${name}] page error: ${e.message}`) })
  page.on('console', m => { if (m.type() === 'error') errors.push(`console: ${m.text()} @ ${m.location()?.url ?? ''}`) })
  page.on('response', r => { if (r.status() >= 400) errors.push(`HTTP ${r.status()} ${r.url()}`) })
  await page.goto(`${base}/?room=${room}&name=${name}${extra}`)
  await page.waitForSelector('#status[data-status="connected"]')
  await page.waitForFunction(() => window.fairyring?.provider?.synced === true)
  return { context, page, errors }
}

/** Mints a token with `scope` signed with the test server's secret (the `fairyring token` command). */
function mintToken (sub, scope) {
  return execFileSync(BIN, ['token', '--sub', sub, '--rooms', '*', '--scope', scope, '--ttl', '15m'], {
    env: { ...process.env, FAIRYRING_JWT_SECRET: SECRET }, encoding: 'utf8'
  }).trim()
}

/** The fairy-made shapes of a page's document: `[{id, locked}]`. */
const fairyShapes = page => page.evaluate(() => {
  const out = []
  window.fairyring.doc.getMap('shapes').forEach((m, id) => {
    const by = m.get?.('createdBy')
    if (typeof by === 'string' && by.startsWith('fairy:')) out.push({ id, locked: m.get('locked') === true })
  })
  return out
})

const shot = (page, name) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`) })
/** A screenshot with the projects list scrolled into the sidebar's view. */
const projectShot = async (page, name) => {
  await page.locator('[data-panel="projects"]').scrollIntoViewIfNeeded()
  await shot(page, name)
}

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

/** Draws a geo shape with `tool` from (x1, y1) to (x2, y2) of the canvas; resolves with its id. */
async function drawShape (page, tool, x1, y1, x2, y2) {
  const c = await canvasBox(page)
  // A press on a fairy's sprite selects the fairy: start below any sprite in the way.
  for (let tries = 0; await page.evaluate(([x, y]) => document.elementFromPoint(x, y)?.closest('[data-fairy]') != null, [c.x + x1, c.y + y1]); tries++) {
    assert(tries < 6, `a fairy sprite stays where the ${tool} would be drawn`)
    y1 += 60; y2 += 60
  }
  await page.click(`[data-tool="${tool}"]`)
  await page.mouse.move(c.x + x1, c.y + y1)
  await page.mouse.down()
  await page.mouse.move(c.x + (x1 + x2) / 2, c.y + (y1 + y2) / 2, { steps: 3 })
  await page.mouse.move(c.x + x2, c.y + y2, { steps: 3 })
  await page.mouse.up()
  const id = await page.evaluate(() => window.fairyring.canvas.selection[0])
  assert(id, `the new ${tool} is selected`)
  await page.keyboard.press('Escape')
  return id
}

/** The ids of the shapes on the live canvas, sorted. */
const liveIds = page => page.$$eval('#layer-shapes [data-shape-id]', es => es.map(e => e.getAttribute('data-shape-id')).sort())

/** The box of a shape in the history preview. */
async function previewBox (page, id) {
  const box = await page.locator(`[data-testid="history-preview"] [data-preview-shape-id="${id}"]`).boundingBox()
  if (box === null) throw new Error(`preview shape ${id} not visible`)
  return box
}

/** A point where one of `ids` is the topmost thing on the page: `{id, x, y}`. */
async function topmostPoint (page, ids) {
  return (await page.waitForFunction(ids => {
    for (const id of ids) {
      const r = document.querySelector(`#layer-shapes [data-shape-id="${id}"]`)?.getBoundingClientRect()
      if (r === undefined || r.width === 0) continue
      for (const fx of [0.5, 0.3, 0.7, 0.1, 0.9]) {
        for (const fy of [0.5, 0.3, 0.7, 0.1, 0.9]) {
          const x = r.x + r.width * fx
          const y = r.y + r.height * fy
          if (document.elementFromPoint(x, y)?.closest('[data-shape-id]')?.getAttribute('data-shape-id') === id) return { id, x, y }
        }
      }
    }
    return null
  }, ids)).jsonValue()
}

/** Moves the mouse over one of `ids` where it is the topmost shape; resolves with that id. */
async function hoverTopmost (page, ids) {
  const hit = await topmostPoint(page, ids)
  await page.mouse.move(hit.x - 3, hit.y - 3)
  await page.mouse.move(hit.x, hit.y, { steps: 2 })
  return hit.id
}

/** The records of a page's `suggestions` root made by fairy `fairyId`: `[{id, op, shapeId, status, streaming}]`. */
const suggestionsOf = (page, fairyId) => page.evaluate(fid => {
  const out = []
  window.fairyring.doc.getMap('suggestions').forEach((m, id) => {
    if (m.get?.('fairyId') !== fid) return
    out.push({ id, op: m.get('op'), shapeId: m.get('shapeId'), status: m.get('status'), requestId: m.get('requestId'), streaming: m.get('props')?.get?.('locked') === true, at: m.get('at') })
  })
  return out.sort((a, b) => a.at - b.at || (a.id < b.id ? -1 : 1))
}, fairyId)

/** A point where the ghost of one of `ids` is the topmost thing on the page: `{id, x, y}`. */
async function ghostPoint (page, ids) {
  return (await page.waitForFunction(ids => {
    for (const id of ids) {
      const r = document.querySelector(`[data-suggestion="${id}"][data-op] .ghost-frame`)?.getBoundingClientRect()
      if (r === undefined || r.width === 0) continue
      for (const fx of [0.85, 0.5, 0.15, 0.3, 0.7]) {
        for (const fy of [0.85, 0.5, 0.15, 0.3, 0.7]) {
          const x = r.x + r.width * fx
          const y = r.y + r.height * fy
          if (document.elementFromPoint(x, y)?.closest('[data-suggestion]')?.getAttribute('data-suggestion') === id) return { id, x, y }
        }
      }
    }
    return null
  }, ids)).jsonValue()
}

/** The centre of a shown ✓ (`accept`) or ✗ (`reject`) of ghost `id`, once nothing covers it. */
async function ghostButton (page, id, action) {
  return (await page.waitForFunction(([id, action]) => {
    const r = document.querySelector(`[data-actions-for="${id}"] [data-suggestion-action="${action}"] circle`)?.getBoundingClientRect()
    if (r === undefined || r.width === 0) return null
    const x = r.x + r.width / 2
    const y = r.y + r.height / 2
    const hit = document.elementFromPoint(x, y)
    return hit?.closest('[data-suggestion-action]')?.getAttribute('data-suggestion-action') === action &&
      hit.closest('[data-actions-for]')?.getAttribute('data-actions-for') === id ? { x, y } : null
  }, [id, action], { timeout: 5000 })).jsonValue()
}

/**
 * Hovers the ghost of one of `ids` (its ✓ and ✗ show), clicks it (selected, they stay while the
 * pointer travels over other ghosts) and presses its `action` button; resolves with the
 * server's answer and the id. `beforeClick` runs while the buttons show on hover.
 */
async function decideOnGhost (page, ids, action, beforeClick = async () => {}) {
  let left = [...ids]
  for (;;) {
    const hit = await ghostPoint(page, left)
    await page.mouse.move(hit.x - 3, hit.y - 3)
    await page.mouse.move(hit.x, hit.y, { steps: 2 })
    await page.waitForSelector(`[data-suggestion="${hit.id}"][data-hovered="true"]`)
    await page.waitForSelector(`[data-actions-for="${hit.id}"] [data-suggestion-action="accept"]`)
    await page.waitForSelector(`[data-actions-for="${hit.id}"] [data-suggestion-action="reject"]`)
    await beforeClick(hit.id)
    await page.mouse.down()
    await page.mouse.up()
    await page.waitForSelector(`[data-suggestion="${hit.id}"][data-selected="true"]`)
    let at
    try {
      at = await ghostButton(page, hit.id, action)
    } catch {
      // Something (a fairy's sprite) stays over its button: try another ghost.
      left = left.filter(id => id !== hit.id)
      assert(left.length > 0, `no ghost's ${action} button could be reached`)
      await page.keyboard.press('Escape')
      continue
    }
    await page.mouse.move(at.x, at.y, { steps: 3 })
    const [response] = await Promise.all([
      page.waitForResponse(r => r.url().endsWith(`/suggestions/${hit.id}/${action}`)),
      page.mouse.click(at.x, at.y)
    ])
    return { id: hit.id, status: response.status(), body: await response.json() }
  }
}

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
    // The offline model paced: its fairy draws shape by shape, so a person can draw while it does
    // (40 ms a piece: a duo's project lives long enough — about 5 s — for Bob to disband it from
    // his page even when a loaded browser takes seconds to show its row).
    server = await startServer({ bin: BIN, store, secret: SECRET, extraArgs: ['--llm-pace-ms', '40'] })
  })
  await step('two browsers join one room', async () => {
    a = await open(browser, server.base, room, 'Alice')
    b = await open(browser, server.base, room, 'Bob')
    await a.page.waitForSelector('[data-person]:has-text("Bob")')
    await b.page.waitForSelector('[data-person]:has-text("Alice")')
    await shot(a.page, '01-alice-joined')
    assert(a.errors.length === 0 && b.errors.length === 0, `no console errors on load: ${[...a.errors, ...b.errors].join('; ')}`)
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


  let fairyId, houseIds, bobRect, team
  await step('Alice invites a fairy from the page; Bob sees its sprite', async () => {
    await a.page.fill('[data-fairy-name]', 'Pip')
    await a.page.click('[data-action="invite-fairy"]')
    const item = await a.page.waitForSelector('[data-fairy-item]:has-text("Pip")')
    fairyId = await item.getAttribute('data-fairy-item')
    assert(fairyId, 'the list entry names the fairy')
    for (const p of [a.page, b.page]) {
      await p.waitForSelector(`[data-fairy="${fairyId}"][data-pose][data-mode]`)
      await p.waitForSelector(`[data-fairy-item="${fairyId}"]`)
    }
    const label = await b.page.textContent(`[data-fairy="${fairyId}"]`)
    assert(label.includes('Pip'), `the sprite is labelled with its name (got ${label})`)
    // The inviter's page selects the new fairy.
    await a.page.waitForSelector(`[data-fairy-item="${fairyId}"][aria-selected="true"]`)
    await shot(a.page, '09-alice-invited-a-fairy')
    await shot(b.page, '09-bob-sees-the-fairy')
  })

  await step('Shift+click selects several fairies, a plain click one', async () => {
    // Bob invites a second fairy without a name (a random one is picked).
    const before = await b.page.locator('[data-fairy-item]').count()
    await b.page.click('[data-action="invite-fairy"]')
    await b.page.waitForFunction(n => document.querySelectorAll('[data-fairy-item]').length > n, before)
    const other = await b.page.getAttribute('[data-fairy-item][aria-selected="true"]', 'data-fairy-item')
    assert(other && other !== fairyId, 'the second fairy is selected in the page that invited it')
    await a.page.waitForSelector(`[data-fairy="${other}"]`)
    await b.page.click(`[data-fairy-item="${fairyId}"] .name`, { modifiers: ['Shift'] })
    await b.page.waitForSelector(`[data-fairy="${fairyId}"][data-selected="true"]`)
    await b.page.waitForSelector(`[data-fairy="${other}"][data-selected="true"]`)
    assert(await b.page.locator('[data-fairy-item][aria-selected="true"]').count() === 2, 'two fairies selected')
    await shot(b.page, '09-bob-selected-two-fairies')
    await b.page.click(`[data-fairy-item="${other}"] .name`)
    await b.page.waitForSelector(`[data-fairy="${fairyId}"]:not([data-selected])`)
    // Selections are per browser: Alice's is unchanged.
    await a.page.waitForSelector(`[data-fairy-item="${fairyId}"][aria-selected="true"]`)
    await b.page.click(`[data-fairy-item="${other}"] [data-action="dismiss-fairy"]`)
    await a.page.waitForSelector(`[data-fairy="${other}"]`, { state: 'detached' })
  })

  await step('Alice prompts "draw a house" from the chat input while Bob draws a rectangle; both see the house and the conversation', async () => {
    // Clicking the sprite selects it (a plain click: it alone).
    await a.page.click(`[data-fairy="${fairyId}"] .body`, { force: true })
    await a.page.waitForSelector(`[data-fairy="${fairyId}"][data-selected="true"]`)
    await a.page.click('[data-fairy-input]')
    // Typing "draw a house" must not switch tools (d = draw, r = rectangle, a = arrow…).
    await a.page.keyboard.type('draw a house')
    const tool = await a.page.getAttribute('#canvas', 'data-active-tool')
    assert(tool === 'select', `no shortcut fired while typing in the chat (tool is ${tool})`)
    // Bob draws a rectangle while the fairy draws: his page notes what the fairy had drawn at
    // the moment his rectangle entered the document.
    await b.page.evaluate(() => {
      const shapes = window.fairyring.doc.getMap('shapes')
      const known = new Set(shapes.keys())
      window.__bobRect = null
      const fairyShapes = () => {
        let n = 0; let locked = 0
        shapes.forEach(s => {
          const by = s.get?.('createdBy')
          if (typeof by === 'string' && by.startsWith('fairy:')) { n++; if (s.get('locked') === true) locked++ }
        })
        return { n, locked }
      }
      shapes.observe(() => {
        if (window.__bobRect !== null) return
        shapes.forEach((m, id) => {
          if (!known.has(id) && String(m.get?.('createdBy')).startsWith('user:')) window.__bobRect = { id, ...fairyShapes() }
        })
      })
    })
    const cb = await canvasBox(b.page)
    await b.page.click('[data-tool="rectangle"]')
    await b.page.mouse.move(cb.x + cb.width - 260, cb.y + cb.height - 200)
    await b.page.mouse.down()
    await b.page.mouse.move(cb.x + cb.width - 200, cb.y + cb.height - 160, { steps: 3 })
    await a.page.keyboard.press('Enter')
    // The rectangle is made when Bob lets go: as soon as the fairy's first shape is in.
    await b.page.waitForFunction(() => {
      let n = 0
      window.fairyring.doc.getMap('shapes').forEach(s => { if (String(s.get?.('createdBy')).startsWith('fairy:')) n++ })
      return n > 0
    }, undefined, { polling: 'raf' })
    await b.page.mouse.move(cb.x + cb.width - 160, cb.y + cb.height - 130, { steps: 2 })
    await b.page.mouse.up()
    const during = await b.page.waitForFunction(() => window.__bobRect).then(h => h.jsonValue())
    console.log(`# Bob's rectangle entered the document with ${during.n} fairy shape(s) drawn, ${during.locked} still streaming`)
    assert(during.n > 0 && (during.n < 4 || during.locked > 0), `Bob drew while the fairy drew (${JSON.stringify(during)})`)
    bobRect = during.id
    await a.page.waitForSelector(`[data-shape-id="${bobRect}"]`)
    for (const p of [a.page, b.page]) {
      await p.waitForFunction(async () => {
        let n = 0; let locked = 0
        window.fairyring.doc.getMap('shapes').forEach(m => {
          const by = m.get?.('createdBy')
          if (typeof by === 'string' && by.startsWith('fairy:')) { n++; if (m.get('locked') === true) locked++ }
        })
        return n >= 4 && locked === 0
      })
      await p.waitForSelector(`[data-fairy-chat="${fairyId}"] [data-chat-role="user"]:has-text("draw a house")`)
      await p.waitForSelector(`[data-fairy-chat="${fairyId}"] [data-chat-role="fairy"]`)
      await p.waitForSelector(`[data-fairy="${fairyId}"][data-mode="idling"]`)
    }
    const shapes = await fairyShapes(b.page)
    for (const s of shapes) await b.page.waitForSelector(`[data-shape-id="${s.id}"]`)
    houseIds = shapes.map(s => s.id)
    const mine = await a.page.textContent(`[data-fairy-chat="${fairyId}"] [data-chat-role="user"]`)
    assert(mine.includes('you'), `Alice sees her own message as hers (got ${mine})`)
    const theirs = await b.page.textContent(`[data-fairy-chat="${fairyId}"] [data-chat-role="user"]`)
    assert(theirs.includes('Alice'), `Bob sees Alice's message with her name (got ${theirs})`)
    assert(await a.page.inputValue('[data-fairy-input]') === '', 'the input is cleared once sent')
    await shot(a.page, '10-alice-sees-the-house')
    await shot(b.page, '10-bob-sees-the-house-and-chat')
  })

  await step('Alice stops a running request; the fairy returns to idling in both', async () => {
    const userLines = await a.page.locator(`[data-fairy-chat="${fairyId}"] [data-chat-role="user"]`).count()
    await a.page.fill('[data-fairy-input]', 'three boxes in a row')
    await a.page.press('[data-fairy-input]', 'Enter')
    // The prompt is accepted once the server wrote it into the chat.
    await a.page.waitForFunction(([id, n]) => document.querySelectorAll(`[data-fairy-chat="${id}"] [data-chat-role="user"]`).length > n, [fairyId, userLines])
    // The offline model may finish before the stop button is clicked: either way the request ends.
    let stopped = false
    try {
      await a.page.click(`[data-fairy-item="${fairyId}"] [data-action="cancel-fairy"]`, { timeout: 3000 })
      stopped = true
    } catch { /* already finished */ }
    console.log(`# stop button ${stopped ? 'clicked while the fairy worked' : 'gone: the request had already finished'}`)
    for (const p of [a.page, b.page]) {
      await p.waitForSelector(`[data-fairy="${fairyId}"][data-mode="idling"]:not([data-pose="thinking"]):not([data-pose="working"])`)
      await p.waitForSelector(`[data-fairy-item="${fairyId}"][data-mode="idling"]`)
    }
    assert(await a.page.locator(`[data-fairy-item="${fairyId}"] [data-action="cancel-fairy"]`).count() === 0, 'no stop button once idle')
    assert(await a.page.locator('#fairy-error:not([hidden])').count() === 0, 'no error shown')
    await shot(a.page, '11-alice-stopped-the-fairy')
  })

  await step("Alice rejects the house request: the house disappears in both, Bob's rectangle stays, both show it rejected", async () => {
    const item = `[data-fairy-chat="${fairyId}"] [data-chat-role="user"]:has-text("draw a house")`
    const request = await a.page.getAttribute(item, 'data-request')
    assert(request, "the person's prompt carries the server's request id")
    for (const p of [a.page, b.page]) {
      assert(await p.locator(`[data-fairy-chat="${fairyId}"] [data-request="${request}"] [data-action="reject-request"]`).count() === 1, 'one reject button per request')
    }
    const reverted = a.page.waitForResponse(r => r.url().includes(`/requests/${request}/revert`))
    await a.page.click(`${item} [data-action="reject-request"]`)
    const response = await reverted
    const body = await response.json()
    assert(response.status() === 200 && body.reverted === houseIds.length && body.kept === 0,
      `the server took back the ${houseIds.length} house shapes (got ${response.status()} ${JSON.stringify(body)})`)
    for (const p of [a.page, b.page]) {
      for (const id of houseIds) await p.waitForSelector(`[data-shape-id="${id}"]`, { state: 'detached' })
      await p.waitForSelector(`[data-shape-id="${bobRect}"]`)
      await p.waitForSelector(`[data-fairy-chat="${fairyId}"] [data-request="${request}"][data-rejected="true"] .rejected`)
      assert(await p.locator(`[data-fairy-chat="${fairyId}"] [data-request="${request}"] [data-action="reject-request"]`).count() === 0, 'no reject button once rejected')
    }
    const left = await b.page.evaluate(ids => ids.filter(id => window.fairyring.doc.getMap('shapes').has(id)), houseIds)
    assert(left.length === 0, `no house shape left in the document (got ${left.join(',')})`)
    assert(await a.page.locator('#fairy-error:not([hidden])').count() === 0, 'no error shown')
    await shot(a.page, '11b-alice-rejected-the-house')
    await shot(b.page, '11b-bob-sees-the-house-rejected-and-his-rectangle')
  })

  await step('Alice starts a project of three fairies ("a house and a tree"): frames, drones drawing, project done, all idle, in both', async () => {
    // Two more fairies: the inviter's page selects each new one by itself.
    team = [fairyId]
    for (const name of ['Dart', 'Echo']) {
      await a.page.fill('[data-fairy-name]', name)
      await a.page.click('[data-action="invite-fairy"]')
      const item = await a.page.waitForSelector(`[data-fairy-item][aria-selected="true"]:has-text("${name}")`)
      team.push(await item.getAttribute('data-fairy-item'))
      await b.page.waitForSelector(`[data-fairy="${team[team.length - 1]}"]`)
    }
    // Pip first (a plain click), then Shift+click the others: the first selected leads.
    await a.page.click(`[data-fairy-item="${fairyId}"] .name`)
    for (const id of team.slice(1)) await a.page.click(`[data-fairy-item="${id}"] .name`, { modifiers: ['Shift'] })
    for (const id of team) await a.page.waitForSelector(`[data-fairy="${id}"][data-selected="true"]`)
    const button = await a.page.waitForSelector('[data-action="group-prompt"]:visible')
    const label = await button.textContent()
    assert(label.includes('3 fairies') && label.includes('Pip leads'), `the group prompt control names the team and its leader (got ${label})`)
    assert(await b.page.locator('[data-action="group-prompt"]:visible').count() === 0, 'Bob selected no fairies: no group prompt control for him')
    await a.page.fill('[data-fairy-input]', 'a house and a tree')
    await button.scrollIntoViewIfNeeded()
    await shot(a.page, '12-alice-selected-three-fairies')
    // What each page shows along the way (the offline project is quick): task frames and their
    // statuses on the canvas, projects and their statuses in the list, each sprite's colour, and
    // each fairy's modes from awareness.
    for (const p of [a.page, b.page]) {
      await p.evaluate(() => {
        const seen = { frames: {}, projects: {}, fills: {}, modes: {} }
        const add = (bag, key, value) => { const l = (bag[key] ??= []); if (value !== null && l[l.length - 1] !== value) l.push(value) }
        const look = () => {
          for (const f of document.querySelectorAll('[data-task]')) add(seen.frames, f.getAttribute('data-task'), f.getAttribute('data-status'))
          for (const r of document.querySelectorAll('[data-project-item]')) add(seen.projects, r.getAttribute('data-project-item'), r.getAttribute('data-status'))
          for (const f of document.querySelectorAll('[data-fairy]')) add(seen.fills, f.getAttribute('data-fairy'), f.querySelector('.body')?.getAttribute('fill') ?? null)
        }
        new MutationObserver(look).observe(document.body, { subtree: true, childList: true, attributes: true, attributeFilter: ['data-status', 'fill'] })
        const awareness = window.fairyring.provider.awareness
        awareness.on('change', () => {
          for (const st of awareness.getStates().values()) if (st?.fairy?.id) add(seen.modes, st.fairy.id, st.fairy.mode)
        })
        look()
        window.__seen = seen
      })
    }
    const t0 = Date.now()
    const [response] = await Promise.all([a.page.waitForResponse(r => r.url().endsWith('/group-prompt')), a.page.click('[data-action="group-prompt"]')])
    const started = await response.json()
    assert(response.status() === 202 && started.orchestratorId === fairyId && started.mode === 'orchestrating-active',
      `the server started a project led by Pip (got ${response.status()} ${JSON.stringify(started)})`)
    const projectId = started.projectId
    assert(await a.page.inputValue('[data-fairy-input]') === '', 'the input is cleared once sent')
    await b.page.waitForSelector(`[data-task^="${projectId}/"]`)
    await projectShot(b.page, '12b-bob-sees-the-project-start')
    for (const p of [a.page, b.page]) {
      await p.waitForSelector(`[data-project-item="${projectId}"][data-status="done"]`, { timeout: 60_000 })
      for (const id of team) await p.waitForSelector(`[data-fairy="${id}"][data-mode="idling"]:not([data-pose="thinking"]):not([data-pose="working"])`)
    }
    console.log(`# group prompt → project done in Alice's page: ${Date.now() - t0} ms`)
    const tasks = await b.page.evaluate(pid => {
      const out = []
      window.fairyring.doc.getMap('tasks').forEach((m, key) => { if (m.get?.('projectId') === pid) out.push({ key, ...m.toJSON() }) })
      return out
    }, projectId)
    assert(tasks.length >= 2, `the orchestrator made the tasks (got ${JSON.stringify(tasks)})`)
    const drones = team.slice(1)
    for (const t of tasks) {
      assert(t.key === `${projectId}/${t.id}` && t.status === 'done' && drones.includes(t.assignedTo), `task ${t.key} is done by a drone (got ${JSON.stringify(t)})`)
    }
    const shapes = await b.page.evaluate(() => {
      const out = []
      window.fairyring.doc.getMap('shapes').forEach((m, id) => out.push({ id, by: m.get?.('createdBy'), locked: m.get?.('locked') === true, x: m.get?.('x'), y: m.get?.('y') }))
      return out
    })
    for (const d of drones) {
      const mine = shapes.filter(s => s.by === `fairy:${d}`)
      const task = tasks.find(t => t.assignedTo === d)
      assert(mine.length > 0 && mine.every(s => !s.locked), `drone ${d} drew (got ${mine.length} shapes)`)
      assert(task !== undefined && mine.every(s => s.x >= task.x - 1 && s.x <= task.x + task.w + 1 && s.y >= task.y - 1 && s.y <= task.y + task.h + 1),
        `drone ${d} drew inside its task's bounds (${JSON.stringify(task)})`)
    }
    for (const p of [a.page, b.page]) {
      for (const t of tasks) {
        const frame = await p.waitForSelector(`[data-task="${t.key}"][data-status="done"]`)
        const text = await frame.textContent()
        assert(text.includes(t.title) && text.includes('done'), `the frame shows its title and status (got ${text})`)
        await p.waitForSelector(`[data-task-group="${projectId}"] [data-task-item="${t.key}"][data-status="done"]`)
      }
      const row = await p.textContent(`[data-project-item="${projectId}"]`)
      assert(row.includes('Pip (leads)') && row.includes('Dart') && row.includes('Echo') && row.includes(`${tasks.length}/${tasks.length} tasks done`),
        `the project row lists the team and the progress (got ${row})`)
      assert(await p.locator(`[data-project-item="${projectId}"] [data-action="disband-project"]`).count() === 0, 'an ended project cannot be disbanded')
      const seen = await p.evaluate(() => window.__seen)
      console.log(`# seen: ${JSON.stringify(seen)}`)
      assert(JSON.stringify(seen.projects[projectId]?.slice(-2)) === '["active","done"]', `the list showed the project active, then done (got ${JSON.stringify(seen.projects[projectId])})`)
      for (const t of tasks) {
        const statuses = seen.frames[t.key] ?? []
        assert(statuses.includes('in-progress') && statuses[statuses.length - 1] === 'done', `frame ${t.key} was shown in progress, then done (saw ${JSON.stringify(statuses)})`)
      }
      assert(seen.modes[fairyId]?.some(m => m.startsWith('orchestrating')), `Pip orchestrated (modes ${JSON.stringify(seen.modes[fairyId])})`)
      for (const d of drones) assert(seen.modes[d]?.includes('working-drone'), `drone ${d} worked (modes ${JSON.stringify(seen.modes[d])})`)
      for (const id of team) {
        const fills = seen.fills[id] ?? []
        assert(fills.length >= 3 && fills[fills.length - 1] === fills[0], `${id} wore the project's colour, then its own again (fills ${JSON.stringify(fills)})`)
      }
    }
    assert(await a.page.locator('#fairy-error:not([hidden])').count() === 0, 'no error shown')
    await projectShot(a.page, '12c-alice-sees-the-project-done')
    await projectShot(b.page, '12c-bob-sees-the-project-done')
  })

  await step('a second project: a member of a live project is refused clearly (409); Bob disbands it and both fairies stop', async () => {
    const [, dart, echo] = team
    await a.page.click(`[data-fairy-item="${dart}"] .name`)
    await a.page.click(`[data-fairy-item="${echo}"] .name`, { modifiers: ['Shift'] })
    await a.page.fill('[data-fairy-input]', 'a house and a tree')
    const [response] = await Promise.all([a.page.waitForResponse(r => r.url().endsWith('/group-prompt')), a.page.click('[data-action="group-prompt"]')])
    const started = await response.json()
    assert(response.status() === 202 && started.orchestratorId === dart && started.mode === 'duo-orchestrating-active',
      `a duo led by Dart (got ${response.status()} ${JSON.stringify(started)})`)
    const projectId = started.projectId
    const askedAt = Date.now()
    // The same two again while their project lives: refused, and the page says why.
    await a.page.fill('[data-fairy-input]', 'a second house')
    const [refused] = await Promise.all([a.page.waitForResponse(r => r.url().endsWith('/group-prompt')), a.page.click('[data-action="group-prompt"]')])
    assert(refused.status() === 409, 'a second group prompt to busy fairies is refused')
    // The row is redrawn as the project moves on: a locator finds the button again at each try.
    // Bob disbands at once, while the duo still works.
    const disband = b.page.locator(`[data-project-item="${projectId}"] [data-action="disband-project"]`)
    const [deleted] = await Promise.all([b.page.waitForResponse(r => r.url().endsWith(`/projects/${projectId}`)), disband.click()])
      .catch(async e => {
        // Say which race was lost: the project ended before Bob's page showed its button, or the
        // button was there and the click or the server did not answer.
        const row = await b.page.locator(`[data-project-item="${projectId}"]`).evaluateAll(rows => rows.map(r => r.outerHTML)).catch(() => [])
        throw new Error(`Bob's disband got no answer ${Date.now() - askedAt} ms after the project started; his row: ${JSON.stringify(row)}\n${e instanceof Error ? e.message : e}`)
      })
    await projectShot(b.page, '12d-bob-disbanded-the-live-project')
    assert(deleted.status() === 204, 'the server disbanded the project')
    // Alice's page said why (checked after the disband: the paced duo finishes in a few
    // seconds, and a loaded browser could take them on these checks before Bob's click).
    const error = await a.page.waitForSelector('#fairy-error:not([hidden])')
    const text = await error.textContent()
    assert(/busy in a live project/.test(text), `the page says a fairy is busy in a project (got ${text})`)
    assert(await a.page.inputValue('[data-fairy-input]') === 'a second house', 'the refused message is kept in the input')
    await shot(a.page, '12d-alice-refused-fairy-in-project')
    for (const p of [a.page, b.page]) {
      await p.waitForSelector(`[data-project-item="${projectId}"][data-status="aborted"]`)
      assert(await p.locator(`[data-project-item="${projectId}"] [data-action="disband-project"]`).count() === 0, 'no disband button once aborted')
      // Its unfinished tasks (if it had made any) leave the canvas and read as aborted in the
      // tasks panel; a task a drone finished before the disband stays, done.
      await p.waitForSelector(`[data-task^="${projectId}/"]:not([data-status="done"])`, { state: 'detached' })
      assert(await p.locator(`[data-task-group="${projectId}"] [data-task-item]:not([data-status="aborted"]):not([data-status="done"])`).count() === 0, 'no open task left in an aborted project')
      for (const id of [dart, echo]) {
        await p.waitForSelector(`[data-fairy="${id}"][data-mode="idling"]:not([data-pose="thinking"]):not([data-pose="working"])`)
        // Back in its own colour (the list's dot), the same in both browsers.
        await p.waitForFunction(id => {
          const fill = document.querySelector(`[data-fairy="${id}"] .body`)?.getAttribute('fill')
          return fill !== undefined && fill === document.querySelector(`[data-fairy-item="${id}"]`)?.getAttribute('data-fairy-color')
        }, id)
      }
    }
    const locked = (await fairyShapes(b.page)).filter(s => s.locked)
    assert(locked.length === 0, `nothing half-drawn is left (got ${JSON.stringify(locked)})`)
    await a.page.fill('[data-fairy-input]', '')
    await projectShot(b.page, '12e-bob-disbanded-the-project')
  })

  await step('dismissing the fairy removes its sprite in both', async () => {
    const drawn = (await fairyShapes(a.page)).length
    await a.page.click(`[data-fairy-item="${fairyId}"] [data-action="dismiss-fairy"]`)
    for (const p of [a.page, b.page]) {
      await p.waitForSelector(`[data-fairy="${fairyId}"]`, { state: 'detached' })
      await p.waitForSelector(`[data-fairy-item="${fairyId}"]`, { state: 'detached' })
    }
    assert((await fairyShapes(a.page)).length === drawn, 'what the fairy drew (and was not rejected) stays after it left')
    await shot(b.page, '13-bob-after-dismiss')
  })

  // ---- History: in a room of its own, so its restore and take-back leave the steps above alone.
  let hana, gus, hist
  await step('history: Hana and Gus draw, a fairy draws a house; the History panel shows who did what, coloured as in the People list, with the prompt', async () => {
    const histRoom = `${room}-history`
    hana = await open(browser, server.base, histRoom, 'Hana')
    gus = await open(browser, server.base, histRoom, 'Gus')
    await hana.page.waitForSelector('[data-person]:has-text("Gus")')
    await gus.page.waitForSelector('[data-person]:has-text("Hana")')
    hist = { hanaSub: await hana.page.evaluate(() => window.fairyring.user.id), gusSub: await gus.page.evaluate(() => window.fairyring.user.id) }
    hist.r1 = await drawShape(hana.page, 'rectangle', 60, 80, 200, 180)
    await gus.page.waitForSelector(`#layer-shapes [data-shape-id="${hist.r1}"]`)
    hist.r2 = await drawShape(gus.page, 'ellipse', 240, 80, 360, 180)
    await hana.page.waitForSelector(`#layer-shapes [data-shape-id="${hist.r2}"]`)
    hist.r3 = await drawShape(hana.page, 'diamond', 60, 300, 180, 400)
    await gus.page.waitForSelector(`#layer-shapes [data-shape-id="${hist.r3}"]`)
    // A fairy draws a house for Hana (the offline model).
    await hana.page.fill('[data-fairy-name]', 'Wren')
    await hana.page.click('[data-action="invite-fairy"]')
    const item = await hana.page.waitForSelector('[data-fairy-item][aria-selected="true"]:has-text("Wren")')
    hist.wren = await item.getAttribute('data-fairy-item')
    await hana.page.fill('[data-fairy-input]', 'draw a house')
    await hana.page.press('[data-fairy-input]', 'Enter')
    for (const p of [hana.page, gus.page]) {
      await p.waitForFunction(id => {
        let n = 0; let locked = 0
        window.fairyring.doc.getMap('shapes').forEach(m => { if (m.get?.('createdBy') === `fairy:${id}`) { n++; if (m.get('locked') === true) locked++ } })
        return n >= 4 && locked === 0
      }, hist.wren)
      await p.waitForSelector(`[data-fairy="${hist.wren}"][data-mode="idling"]:not([data-pose="thinking"]):not([data-pose="working"])`)
    }
    hist.house = (await fairyShapes(hana.page)).map(s => s.id)

    await hana.page.click('[data-testid="history-toggle"]')
    await hana.page.waitForSelector('[data-testid="history-panel"][data-loaded="true"]')
    const entry = sel => `[data-testid="history-entry"]${sel}`
    const mine = await hana.page.waitForSelector(entry(`[data-actor-kind="user"][data-actor-id="${hist.hanaSub}"][data-added~="${hist.r1}"]`))
    const mineText = await mine.textContent()
    assert(mineText.includes('Hana') && mineText.includes('(you)'), `Hana's entry names her (got ${mineText})`)
    const his = await hana.page.waitForSelector(entry(`[data-actor-kind="user"][data-actor-id="${hist.gusSub}"][data-added~="${hist.r2}"]`))
    assert((await his.textContent()).includes('Gus'), "Gus's entry names him")
    const fairyEntry = await hana.page.waitForSelector(entry(`[data-actor-kind="fairy"][data-actor-id="${hist.wren}"]`))
    const fairyText = await fairyEntry.textContent()
    assert(fairyText.includes('Wren') && fairyText.includes('draw a house') && fairyText.includes('asked by Hana'),
      `the fairy's entry names it, quotes the prompt and who asked (got ${fairyText})`)
    // The row's dot is the fairy's own colour (its dot in the Fairies list), not the logo's pink.
    const dots = await hana.page.evaluate(id => ({
      row: getComputedStyle(document.querySelector(`[data-testid="history-entry"][data-actor-kind="fairy"][data-actor-id="${id}"] .dot`)).backgroundColor,
      list: getComputedStyle(document.querySelector(`[data-fairy-item="${id}"] .dot`)).backgroundColor
    }), hist.wren)
    assert(dots.row === dots.list && dots.row !== 'rgb(249, 168, 212)', `the fairy's history row has its own colour (row ${dots.row}, list ${dots.list})`)
    const houseAdded = (await hana.page.$$eval(entry(`[data-actor-kind="fairy"][data-actor-id="${hist.wren}"]`), es => es.map(e => e.getAttribute('data-added')).join(' '))).split(' ')
    assert(hist.house.every(id => houseAdded.includes(id)), `the fairy's entries list the house shapes (${houseAdded} vs ${hist.house})`)
    await hana.page.waitForSelector(entry(`[data-added~="${hist.r3}"]`))
    // Coloured as in the People list: Gus's dot is the colour of Gus in Hana's people list.
    const dot = s => hana.page.$eval(s, e => getComputedStyle(e).backgroundColor)
    const gusDot = await dot('#people [data-person]:has-text("Gus") .dot')
    const gusEntryDot = await his.$eval('.dot', e => getComputedStyle(e).backgroundColor)
    assert(gusDot === gusEntryDot, `Gus's entry has his People-list colour (${gusEntryDot} vs ${gusDot})`)
    assert(await dot('#people [data-person="self"] .dot') === await mine.$eval('.dot', e => getComputedStyle(e).backgroundColor), "Hana's entry has her colour")
    // Newest first: the fairy's house, Hana's diamond, Gus's ellipse, Hana's rectangle.
    const order = await hana.page.$$eval('[data-testid="history-entry"]', es => es.map(e => e.getAttribute('data-added').split(' ')))
    const at = id => order.findIndex(a => a.includes(id))
    assert(at(hist.house[0]) < at(hist.r3) && at(hist.r3) < at(hist.r2) && at(hist.r2) < at(hist.r1), `newest first (${JSON.stringify(order)})`)
    // Gus's own panel names Hana without "(you)".
    await gus.page.click('[data-testid="history-toggle"]')
    const inGus = await gus.page.waitForSelector(entry(`[data-actor-id="${hist.hanaSub}"][data-added~="${hist.r1}"]`))
    const inGusText = await inGus.textContent()
    assert(inGusText.includes('Hana') && !inGusText.includes('(you)'), `Gus sees Hana's entry by her name (got ${inGusText})`)

    // Hovering a shape shows who created it and who last changed it.
    const house = await hoverTopmost(hana.page, hist.house)
    const tip = await hana.page.waitForSelector(`[data-testid="shape-tooltip"]:not([hidden])[data-shape="${house}"][data-created-by="fairy:${hist.wren}"]`)
    await hana.page.waitForSelector('[data-testid="shape-tooltip"]:not([hidden]) .changed')
    const tipText = await tip.textContent()
    console.log(`# hover card: ${tipText}`)
    assert(tipText.includes('Created by Wren') && tipText.includes('draw a house'), `the hover card names the fairy and its prompt (got ${tipText})`)
    await shot(hana.page, 'history-hover')
    await hoverTopmost(hana.page, [hist.r2])
    const tip2 = await hana.page.waitForSelector(`[data-testid="shape-tooltip"]:not([hidden])[data-shape="${hist.r2}"][data-created-by="user:${hist.gusSub}"]`)
    assert((await tip2.textContent()).includes('Created by Gus'), 'the hover card names Gus')
  })

  await step('history: clicking an entry previews the canvas as it was (read-only, over the dimmed canvas); Restore brings that version back in both', async () => {
    const before = await liveIds(hana.page)
    assert([hist.r1, hist.r2, hist.r3, ...hist.house].every(id => before.includes(id)), `everything is on the canvas (${before})`)
    const first = `[data-testid="history-entry"][data-actor-id="${hist.hanaSub}"][data-added~="${hist.r1}"]`
    const seq = Number(await hana.page.getAttribute(first, 'data-to-seq'))
    await hana.page.click(first)
    await hana.page.waitForSelector(`${first}[aria-selected="true"]`)
    const preview = await hana.page.waitForSelector(`[data-testid="history-preview"][data-state="ready"][data-seq="${seq}"]`)
    const shown = await preview.$$eval('[data-preview-shape-id]', es => es.map(e => e.getAttribute('data-preview-shape-id')))
    assert(JSON.stringify(shown) === JSON.stringify([hist.r1]), `the preview shows the canvas after Hana's first rectangle (got ${shown})`)
    assert(JSON.stringify(await liveIds(hana.page)) === JSON.stringify(before), 'the live canvas is unchanged under the preview')
    const box = await previewBox(hana.page, hist.r1)
    const live = await shapeBox(hana.page, hist.r1)
    assert(Math.abs(box.x - live.x) < 2 && Math.abs(box.width - live.width) < 2, 'the preview is drawn on the live camera')
    const takeBack = await hana.page.textContent('[data-testid="history-takeback"]')
    assert(takeBack === 'Take back everything Hana did since then', `the take-back button names Hana (got ${takeBack})`)
    // Read-only: a drag over the preview moves nothing.
    await hana.page.mouse.move(box.x + box.width / 2, box.y + box.height / 2)
    await hana.page.mouse.down()
    await hana.page.mouse.move(box.x + box.width / 2 + 80, box.y + box.height / 2 + 60, { steps: 4 })
    await hana.page.mouse.up()
    const after = await shapeBox(hana.page, hist.r1)
    assert(Math.abs(after.x - live.x) < 1 && Math.abs(after.y - live.y) < 1, 'nothing moved under the preview')
    await shot(hana.page, 'history-preview')
    const [response] = await Promise.all([hana.page.waitForResponse(r => r.url().endsWith('/restore')), hana.page.click('[data-testid="history-restore"]')])
    assert(response.status() === 200, `the server restored (got ${response.status()} ${await response.text()})`)
    for (const p of [hana.page, gus.page]) {
      await p.waitForFunction(want => JSON.stringify([...document.querySelectorAll('#layer-shapes [data-shape-id]')].map(e => e.getAttribute('data-shape-id')).sort()) === want,
        JSON.stringify([hist.r1]))
    }
    await hana.page.waitForSelector('[data-testid="history-preview"]', { state: 'hidden' })
    await hana.page.waitForSelector('[data-testid="history-message"]:not([hidden])')
    await hana.page.waitForSelector(`[data-testid="history-entry"][data-via="restore"][data-actor-id="${hist.hanaSub}"]`)
    // The server's view agrees: the room now is that version.
    const same = await hana.page.evaluate(async ([room, seq]) => {
      const headers = { authorization: `Bearer ${window.fairyring.provider.params.token}` }
      const get = async path => Object.keys((await (await fetch(`/rooms/${room}${path}`, { headers })).json()).doc.shapes).sort()
      return [await get(`/versions/${seq}`), await get('/doc')]
    }, [`${room}-history`, seq])
    assert(JSON.stringify(same[0]) === JSON.stringify(same[1]), `the room is that version again (${JSON.stringify(same)})`)
  })

  await step("history: Hana takes back everything Gus did since his entry; her later move is kept", async () => {
    hist.r4 = await drawShape(gus.page, 'rectangle', 300, 260, 420, 340)
    await hana.page.waitForSelector(`#layer-shapes [data-shape-id="${hist.r4}"]`)
    // Hana moves her rectangle after Gus drew.
    const x0 = await gus.page.evaluate(id => window.fairyring.doc.getMap('shapes').get(id).get('x'), hist.r1)
    const grab = await topmostPoint(hana.page, [hist.r1])
    await hana.page.mouse.move(grab.x, grab.y)
    await hana.page.mouse.down()
    await hana.page.mouse.move(grab.x + 30, grab.y + 20, { steps: 3 })
    await hana.page.mouse.move(grab.x + 60, grab.y + 40, { steps: 3 })
    await hana.page.mouse.up()
    await gus.page.waitForFunction(([id, x]) => Math.abs(window.fairyring.doc.getMap('shapes').get(id)?.get('x') - x) > 30, [hist.r1, x0])
    const moved = await hana.page.evaluate(id => ({ x: window.fairyring.doc.getMap('shapes').get(id).get('x'), y: window.fairyring.doc.getMap('shapes').get(id).get('y') }), hist.r1)
    const his = `[data-testid="history-entry"][data-actor-id="${hist.gusSub}"][data-added~="${hist.r4}"]`
    await hana.page.click(his)
    const preview = await hana.page.waitForSelector('[data-testid="history-preview"][data-state="ready"]')
    const shown = (await preview.$$eval('[data-preview-shape-id]', es => es.map(e => e.getAttribute('data-preview-shape-id')))).sort()
    assert(JSON.stringify(shown) === JSON.stringify([hist.r1, hist.r4].sort()), `the preview shows the canvas after Gus's rectangle (got ${shown})`)
    const label = await hana.page.textContent('[data-testid="history-takeback"]')
    assert(label === 'Take back everything Gus did since then', `the take-back button names Gus (got ${label})`)
    const [response] = await Promise.all([hana.page.waitForResponse(r => r.url().endsWith('/rollback')), hana.page.click('[data-testid="history-takeback"]')])
    const body = await response.json()
    assert(response.status() === 200 && body.reverted >= 1, `the server took back Gus's rectangle (got ${response.status()} ${JSON.stringify(body)})`)
    assert(JSON.parse(response.request().postData()).sinceSeq === Number(await hana.page.getAttribute(his, 'data-from-seq')) - 1, 'since just before his entry')
    for (const p of [hana.page, gus.page]) {
      await p.waitForSelector(`[data-shape-id="${hist.r4}"]`, { state: 'detached' })
      const r1 = await p.evaluate(id => ({ x: window.fairyring.doc.getMap('shapes').get(id)?.get('x'), y: window.fairyring.doc.getMap('shapes').get(id)?.get('y') }), hist.r1)
      assert(r1.x === moved.x && r1.y === moved.y, `Hana's move is kept (got ${JSON.stringify(r1)} vs ${JSON.stringify(moved)})`)
    }
    const message = await hana.page.textContent('[data-testid="history-message"]')
    assert(message.includes('Gus'), `the panel says what was taken back (got ${message})`)
    await hana.page.waitForSelector(`[data-testid="history-entry"][data-via="rollback"][data-actor-id="${hist.hanaSub}"]`)
    await gus.page.waitForSelector(`[data-testid="history-entry"][data-via="rollback"]:has-text("Hana")`)
    await hoverTopmost(hana.page, [hist.r1])
    await hana.page.waitForSelector(`[data-testid="shape-tooltip"]:not([hidden])[data-shape="${hist.r1}"][data-created-by="user:${hist.hanaSub}"]`)
    await hana.page.mouse.move(5, 5)
    await shot(hana.page, 'history-panel')
    await shot(gus.page, 'history-panel-gus')
  })

  await step("history: Hana restores the version with Wren's house, then rejects Wren's request in the chat: the house goes (a take-back after a restore)", async () => {
    // The first restore deleted the house as Hana's; this one brings it back exactly as Wren drew it.
    const wrens = `[data-testid="history-entry"][data-actor-kind="fairy"][data-actor-id="${hist.wren}"]`
    const seq = Number(await hana.page.getAttribute(wrens, 'data-to-seq'))
    await hana.page.click(wrens)
    await hana.page.waitForSelector(`[data-testid="history-preview"][data-state="ready"][data-seq="${seq}"]`)
    const [restored] = await Promise.all([hana.page.waitForResponse(r => r.url().endsWith('/restore')), hana.page.click('[data-testid="history-restore"]')])
    assert(restored.status() === 200, `the server restored (got ${restored.status()} ${await restored.text()})`)
    for (const p of [hana.page, gus.page]) {
      for (const id of hist.house) await p.waitForSelector(`#layer-shapes [data-shape-id="${id}"]`)
    }
    await hana.page.waitForSelector('[data-testid="history-preview"]', { state: 'hidden' })
    if (await hana.page.getAttribute(`[data-fairy-item="${hist.wren}"]`, 'aria-selected') !== 'true') await hana.page.click(`[data-fairy-item="${hist.wren}"]`)
    const item = `[data-fairy-chat="${hist.wren}"] [data-chat-role="user"]:has-text("draw a house")`
    const request = await hana.page.getAttribute(item, 'data-request')
    assert(request, "the prompt carries the server's request id")
    const [response] = await Promise.all([
      hana.page.waitForResponse(r => r.url().includes(`/requests/${request}/revert`)),
      hana.page.click(`${item} [data-action="reject-request"]`)
    ])
    const body = await response.json()
    assert(response.status() === 200 && body.reverted === hist.house.length && body.kept === 0,
      `the take-back removes the ${hist.house.length} restored house shapes (got ${response.status()} ${JSON.stringify(body)})`)
    for (const p of [hana.page, gus.page]) {
      for (const id of hist.house) await p.waitForSelector(`[data-shape-id="${id}"]`, { state: 'detached' })
      await p.waitForSelector(`#layer-shapes [data-shape-id="${hist.r1}"]`)
    }
    await shot(hana.page, 'history-takeback-after-restore')
    assert(hana.errors.length === 0 && gus.errors.length === 0, `no console errors or refused requests: ${[...hana.errors, ...gus.errors].join('; ')}`)
    await hana.context.close()
    await gus.context.close()
  })

  // ---- Review mode: in a room of its own.
  let rita, sam, review
  await step('review: Rita invites a fairy in suggest mode and asks for a house; both see its suggestions as ghosts, none in the shapes', async () => {
    const reviewRoom = `${room}-review`
    rita = await open(browser, server.base, reviewRoom, 'Rita')
    sam = await open(browser, server.base, reviewRoom, 'Sam')
    await rita.page.waitForSelector('[data-person]:has-text("Sam")')
    await sam.page.waitForSelector('[data-person]:has-text("Rita")')
    await rita.page.fill('[data-fairy-name]', 'Quill')
    await rita.page.check('[data-invite-apply]')
    const [invited] = await Promise.all([
      rita.page.waitForRequest(r => r.method() === 'POST' && r.url().endsWith(`/rooms/${reviewRoom}/fairies`)),
      rita.page.click('[data-action="invite-fairy"]')
    ])
    assert(JSON.parse(invited.postData()).apply === 'suggest', `the invitation asks for suggest mode (got ${invited.postData()})`)
    const item = await rita.page.waitForSelector('[data-fairy-item][aria-selected="true"]:has-text("Quill")')
    review = { fairy: await item.getAttribute('data-fairy-item') }
    // Both toggles start from the fairy's entity: suggest.
    for (const p of [rita.page, sam.page]) {
      await p.waitForSelector(`[data-fairy-item="${review.fairy}"] [data-action="toggle-suggest"][aria-pressed="true"]`)
    }
    assert(await rita.page.evaluate(id => window.fairyring.doc.getMap('fairies').get(id)?.get('apply'), review.fairy) === 'suggest', 'the entity says apply: suggest')
    await rita.page.waitForFunction(() => document.querySelector('[data-fairy-apply]')?.value === 'suggest')
    await rita.page.fill('[data-fairy-input]', 'draw a house')
    const [prompted] = await Promise.all([
      rita.page.waitForRequest(r => r.method() === 'POST' && r.url().endsWith(`/fairies/${review.fairy}/prompt`)),
      rita.page.press('[data-fairy-input]', 'Enter')
    ])
    assert(JSON.parse(prompted.postData()).apply === 'suggest', `the prompt is sent in suggest mode (got ${prompted.postData()})`)
    // The offline house starts at the page's origin: both look a little up and left of it.
    for (const p of [rita.page, sam.page]) await p.evaluate(() => window.fairyring.canvas.setCamera({ x: -160, y: -90, zoom: 1 }))
    for (const p of [rita.page, sam.page]) {
      await p.waitForFunction(id => {
        let n = 0; let streaming = 0
        window.fairyring.doc.getMap('suggestions').forEach(m => {
          if (m.get?.('fairyId') !== id || m.get('status') !== 'pending') return
          n++
          if (m.get('props')?.get?.('locked') === true) streaming++
        })
        return n >= 4 && streaming === 0
      }, review.fairy)
      await p.waitForSelector(`[data-fairy="${review.fairy}"][data-mode="idling"]:not([data-pose="thinking"]):not([data-pose="working"])`)
    }
    review.records = await suggestionsOf(sam.page, review.fairy)
    console.log(`# suggestions: ${JSON.stringify(review.records)}`)
    assert(review.records.length >= 4 && review.records.every(r => r.op === 'create' && r.status === 'pending' && r.requestId), `four pending creates of one request (got ${JSON.stringify(review.records)})`)
    review.request = review.records[0].requestId
    for (const p of [rita.page, sam.page]) {
      await p.waitForFunction(n => document.querySelectorAll('#layer-suggestions [data-suggestion][data-op="create"]').length === n, review.records.length)
      const inShapes = await p.evaluate(ids => ids.filter(id => window.fairyring.doc.getMap('shapes').has(id)), review.records.map(r => r.shapeId))
      assert(inShapes.length === 0, `nothing suggested is in shapes yet (got ${inShapes})`)
      assert(await p.locator('[data-shape-id]').count() === 0, 'no shape on the canvas: ghosts are not shapes')
      await p.waitForSelector(`[data-fairy-item="${review.fairy}"] [data-pending="${review.records.length}"]`)
      await p.waitForSelector(`[data-fairy-chat="${review.fairy}"] [data-request="${review.request}"] [data-action="accept-all"]:has-text("Accept all ${review.records.length}")`)
    }
    // The ghosts wear the fairy's colour: the pink edge of its sprite (it is in no project).
    const stroke = await rita.page.getAttribute(`[data-suggestion="${review.records[0].id}"] .ghost-frame`, 'stroke')
    const edge = await rita.page.getAttribute(`[data-fairy="${review.fairy}"] .body`, 'stroke')
    assert(stroke === edge, `a ghost has its fairy's colour (${stroke} vs the sprite's ${edge})`)
    await rita.page.mouse.move(5, 5)
    await shot(rita.page, 'suggest-ghosts')
    await shot(sam.page, 'suggest-ghosts-sam')
  })

  await step('review: a ghost under the top edge of the canvas keeps its ✓ and ✗ inside the canvas', async () => {
    // Sam scrolls so that the topmost ghost's frame starts above the canvas (under the toolbar).
    const p = sam.page
    const before = await p.evaluate(() => ({ ...window.fairyring.canvas.cam }))
    const top = await p.evaluate(ids => {
      let best = null
      for (const id of ids) {
        const r = document.querySelector(`[data-suggestion="${id}"][data-op] .ghost-frame`)?.getBoundingClientRect()
        if (r !== undefined && (best === null || r.y < best.y)) best = { id, y: r.y }
      }
      return best
    }, review.records.map(r => r.id))
    const stage = await canvasBox(p)
    await p.evaluate(([cam, dy]) => window.fairyring.canvas.setCamera({ ...cam, y: cam.y + dy / cam.zoom }), [before, top.y - stage.y + 12])
    // Drawn on the new camera before the pointer looks for it.
    await p.waitForFunction(([id, y]) => (document.querySelector(`[data-suggestion="${id}"][data-op] .ghost-frame`)?.getBoundingClientRect().y ?? 1e9) < y,
      [top.id, stage.y], { polling: 'raf' })
    const hit = await ghostPoint(p, [top.id])
    await p.mouse.move(hit.x - 3, hit.y + 3)
    await p.mouse.move(hit.x, hit.y, { steps: 2 })
    await p.waitForSelector(`[data-suggestion="${top.id}"][data-hovered="true"]`)
    await p.waitForSelector(`[data-actions-for="${top.id}"] [data-suggestion-action="reject"]`)
    // Read in one go (the renderer may replace the elements between frames).
    const rects = await p.waitForFunction(id => {
      const box = sel => { const r = document.querySelector(sel)?.getBoundingClientRect(); return r === undefined ? null : { x: r.x, y: r.y, width: r.width, height: r.height } }
      const out = {
        frame: box(`[data-suggestion="${id}"][data-op] .ghost-frame`),
        accept: box(`[data-actions-for="${id}"] [data-suggestion-action="accept"] circle`),
        reject: box(`[data-actions-for="${id}"] [data-suggestion-action="reject"] circle`)
      }
      return out.frame !== null && out.accept !== null && out.reject !== null ? out : null
    }, top.id).then(h => h.jsonValue())
    const frame = rects.frame
    assert(frame.y < stage.y, `the ghost's frame starts above the canvas (${frame.y} < ${stage.y})`)
    for (const action of ['accept', 'reject']) {
      const b = rects[action]
      assert(b.x >= stage.x && b.y >= stage.y && b.x + b.width <= stage.x + stage.width && b.y + b.height <= stage.y + stage.height,
        `${action} is inside the canvas (${JSON.stringify(b)} in ${JSON.stringify(stage)})`)
      // Nothing of the page's chrome covers it: the pointer there reaches the button.
      await ghostButton(p, top.id, action)
    }
    await shot(p, 'suggest-controls-at-the-edge')
    await p.mouse.move(5, 5)
    await p.evaluate(cam => window.fairyring.canvas.setCamera(cam), before)
  })

  await step('review: ✓ on a ghost makes its shape in both browsers; ✗ on another drops it', async () => {
    const ids = review.records.map(r => r.id)
    const accepted = await decideOnGhost(rita.page, ids, 'accept', () => shot(rita.page, 'suggest-hover'))
    assert(accepted.status === 200 && accepted.body.status === 'accepted' && typeof accepted.body.seq === 'number',
      `the server accepted ${accepted.id} (got ${accepted.status} ${JSON.stringify(accepted.body)})`)
    review.accepted = review.records.find(r => r.id === accepted.id)
    for (const p of [sam.page, rita.page]) {
      await p.waitForFunction(id => window.fairyring.doc.getMap('shapes').has(id), review.accepted.shapeId)
      await p.waitForSelector(`#layer-shapes [data-shape-id="${review.accepted.shapeId}"]`)
      await p.waitForSelector(`[data-suggestion="${accepted.id}"]`, { state: 'detached' })
      assert(await p.evaluate(id => window.fairyring.doc.getMap('suggestions').get(id)?.get('status'), accepted.id) === 'accepted', 'the record reads accepted')
    }
    const rejected = await decideOnGhost(rita.page, ids.filter(id => id !== accepted.id), 'reject')
    assert(rejected.status === 200 && rejected.body.status === 'rejected', `the server rejected ${rejected.id} (got ${rejected.status} ${JSON.stringify(rejected.body)})`)
    review.rejected = review.records.find(r => r.id === rejected.id)
    for (const p of [sam.page, rita.page]) {
      await p.waitForSelector(`[data-suggestion="${rejected.id}"]`, { state: 'detached' })
      const r = await p.evaluate(([id, sid]) => ({ status: window.fairyring.doc.getMap('suggestions').get(id)?.get('status'), inShapes: window.fairyring.doc.getMap('shapes').has(sid) }), [rejected.id, review.rejected.shapeId])
      assert(r.status === 'rejected' && !r.inShapes, `the rejected suggestion stays out of shapes (got ${JSON.stringify(r)})`)
      await p.waitForSelector(`[data-fairy-item="${review.fairy}"] [data-pending="${review.records.length - 2}"]`)
    }
    assert(await rita.page.locator('#toast:not([hidden])').count() === 0, 'no error notice')
  })

  await step('review: Accept all in the chat takes the rest; both see the shapes and the request decided', async () => {
    const rest = review.records.filter(r => r.id !== review.accepted.id && r.id !== review.rejected.id)
    const button = rita.page.locator(`[data-fairy-chat="${review.fairy}"] [data-request="${review.request}"] [data-action="accept-all"]`)
    assert((await button.textContent()) === `Accept all ${rest.length}`, `the button counts what waits (got ${await button.textContent()})`)
    const [response] = await Promise.all([
      rita.page.waitForResponse(r => r.url().endsWith(`/fairies/${review.fairy}/requests/${review.request}/accept`)),
      button.click()
    ])
    const body = await response.json()
    assert(response.status() === 200 && JSON.stringify([...body.accepted].sort()) === JSON.stringify(rest.map(r => r.id).sort()) && body.conflicts.length === 0,
      `the server accepted the ${rest.length} left (got ${response.status()} ${JSON.stringify(body)})`)
    const want = [review.accepted, ...rest].map(r => r.shapeId).sort()
    for (const p of [sam.page, rita.page]) {
      await p.waitForSelector('#layer-suggestions [data-suggestion]', { state: 'detached' })
      await p.waitForFunction(want => JSON.stringify([...document.querySelectorAll('#layer-shapes [data-shape-id]')].map(e => e.getAttribute('data-shape-id')).sort()) === want, JSON.stringify(want))
      const review1 = await p.textContent(`[data-fairy-chat="${review.fairy}"] [data-request="${review.request}"] [data-review="decided"]`)
      assert(review1.includes(`${rest.length + 1} accepted`) && review1.includes('1 rejected'), `the chat says how the request was decided (got ${review1})`)
      assert(await p.locator(`[data-fairy-chat="${review.fairy}"] [data-action="accept-all"], [data-fairy-chat="${review.fairy}"] [data-action="reject-all"]`).count() === 0, 'nothing left to decide')
      assert(await p.locator(`[data-fairy-item="${review.fairy}"] [data-pending]`).count() === 0, 'nothing waits')
    }
    await rita.page.mouse.move(5, 5)
    await shot(rita.page, 'suggest-accepted')
    await shot(sam.page, 'suggest-accepted-sam')
  })

  await step('review: "direct" beside the input draws at once for one prompt; Reject all drops a whole request in both', async () => {
    const fairyShapeIds = p => p.evaluate(id => {
      const out = []
      window.fairyring.doc.getMap('shapes').forEach((m, k) => { if (m.get?.('createdBy') === `fairy:${id}` && m.get('locked') !== true) out.push(k) })
      return out.sort()
    }, review.fairy)
    const before = await fairyShapeIds(rita.page)
    const records = (await suggestionsOf(rita.page, review.fairy)).length
    await rita.page.selectOption('[data-fairy-apply]', 'direct')
    await rita.page.fill('[data-fairy-input]', 'three boxes in a row')
    const [direct] = await Promise.all([
      rita.page.waitForRequest(r => r.method() === 'POST' && r.url().endsWith(`/fairies/${review.fairy}/prompt`)),
      rita.page.press('[data-fairy-input]', 'Enter')
    ])
    assert(JSON.parse(direct.postData()).apply === 'direct', `this prompt is sent direct (got ${direct.postData()})`)
    // The choice was for that prompt: the fairy's toggle shows again.
    await rita.page.waitForFunction(() => document.querySelector('[data-fairy-apply]')?.value === 'suggest')
    for (const p of [rita.page, sam.page]) {
      await p.waitForFunction(([id, n]) => {
        let made = 0
        window.fairyring.doc.getMap('shapes').forEach(m => { if (m.get?.('createdBy') === `fairy:${id}` && m.get('locked') !== true) made++ })
        return made >= n + 3
      }, [review.fairy, before.length])
      await p.waitForSelector(`[data-fairy="${review.fairy}"][data-mode="idling"]:not([data-pose="thinking"]):not([data-pose="working"])`)
    }
    assert((await suggestionsOf(rita.page, review.fairy)).length === records, 'a direct prompt suggests nothing')
    const drawn = await fairyShapeIds(sam.page)
    review.boxes = drawn.filter(id => !before.includes(id))
    await rita.page.fill('[data-fairy-input]', 'flowchart S0 -> S1 -> S2')
    await rita.page.press('[data-fairy-input]', 'Enter')
    for (const p of [rita.page, sam.page]) {
      await p.waitForFunction(([id, n]) => {
        let pending = 0; let streaming = 0
        window.fairyring.doc.getMap('suggestions').forEach(m => {
          if (m.get?.('fairyId') !== id || m.get('status') !== 'pending') return
          pending++
          if (m.get('props')?.get?.('locked') === true) streaming++
        })
        return pending >= n && streaming === 0
      }, [review.fairy, 5])
      await p.waitForSelector(`[data-fairy="${review.fairy}"][data-mode="idling"]:not([data-pose="thinking"]):not([data-pose="working"])`)
    }
    const flow = (await suggestionsOf(rita.page, review.fairy)).filter(r => r.status === 'pending')
    const request = flow[0].requestId
    assert(flow.every(r => r.requestId === request) && request !== review.request, `one new request's suggestions (got ${JSON.stringify(flow)})`)
    for (const p of [rita.page, sam.page]) {
      await p.waitForFunction(n => document.querySelectorAll('#layer-suggestions [data-suggestion][data-op]').length === n, flow.length)
    }
    const button = sam.page.locator(`[data-fairy-chat="${review.fairy}"] [data-request="${request}"] [data-action="reject-all"]`)
    const [response] = await Promise.all([
      sam.page.waitForResponse(r => r.url().endsWith(`/fairies/${review.fairy}/requests/${request}/revert`)),
      button.click()
    ])
    console.log(`# reject all: ${response.status()} ${await response.text()}`)
    assert(response.status() === 200, `the server rejected the request's suggestions (got ${response.status()})`)
    for (const p of [rita.page, sam.page]) {
      await p.waitForSelector('#layer-suggestions [data-suggestion]', { state: 'detached' })
      const statuses = await p.evaluate(ids => ids.map(id => window.fairyring.doc.getMap('suggestions').get(id)?.get('status')), flow.map(r => r.id))
      assert(statuses.every(s => s === 'rejected'), `every suggestion of the request reads rejected (got ${statuses})`)
      assert(JSON.stringify(await fairyShapeIds(p)) === JSON.stringify(drawn), 'the shapes are as they were')
      const said = await p.textContent(`[data-fairy-chat="${review.fairy}"] [data-request="${request}"] [data-review="decided"]`)
      assert(said.includes(`${flow.length} rejected`), `the chat says the request was rejected (got ${said})`)
    }
    await shot(sam.page, 'suggest-rejected-all')
  })

  await step('review: with a box selected, "move it right" is an update drawn beside the box and "delete it" a delete crossed out; ✓ moves the box in both, ✗ keeps the other', async () => {
    assert(review.boxes.length === 3, `three boxes drawn directly (got ${review.boxes})`)
    const [moving, deleting] = review.boxes
    const xOf = (p, id) => p.evaluate(id => window.fairyring.doc.getMap('shapes').get(id)?.get('x'), id)
    const x0 = await xOf(rita.page, moving)
    /** Selects `id` (as a click with the select tool does), asks in suggest mode, and returns the pending record the request made. */
    const ask = async (id, message, op) => {
      await rita.page.evaluate(id => window.fairyring.canvas.select([id]), id)
      await rita.page.fill('[data-fairy-input]', message)
      const [sent] = await Promise.all([
        rita.page.waitForRequest(r => r.method() === 'POST' && r.url().endsWith(`/fairies/${review.fairy}/prompt`)),
        rita.page.press('[data-fairy-input]', 'Enter')
      ])
      const body = JSON.parse(sent.postData())
      assert(body.apply === 'suggest' && JSON.stringify(body.selectedShapeIds) === JSON.stringify([id]), `sent in suggest mode with the selection (got ${sent.postData()})`)
      for (const p of [rita.page, sam.page]) {
        await p.waitForFunction(([fid, id, op]) => {
          let found = false
          window.fairyring.doc.getMap('suggestions').forEach(m => {
            if (m.get?.('fairyId') === fid && m.get('shapeId') === id && m.get('op') === op && m.get('status') === 'pending' && m.get('streaming') !== true) found = true
          })
          return found
        }, [review.fairy, id, op])
        await p.waitForSelector(`[data-fairy="${review.fairy}"][data-mode="idling"]:not([data-pose="thinking"]):not([data-pose="working"])`)
      }
      return (await suggestionsOf(rita.page, review.fairy)).find(r => r.shapeId === id && r.op === op && r.status === 'pending')
    }
    const update = await ask(moving, 'move it right', 'update')
    const remove = await ask(deleting, 'delete it', 'delete')
    await rita.page.evaluate(() => window.fairyring.canvas.select([]))
    for (const p of [rita.page, sam.page]) {
      await p.waitForSelector(`#layer-suggestions [data-suggestion="${update.id}"][data-op="update"]`)
      await p.waitForSelector(`#layer-suggestions [data-suggestion="${remove.id}"][data-op="delete"]`)
      assert(await xOf(p, moving) === x0, 'the box has not moved yet')
      assert(await p.evaluate(id => window.fairyring.doc.getMap('shapes').has(id), deleting), 'the other box is still there')
    }
    await rita.page.mouse.move(5, 5)
    await shot(rita.page, 'suggest-update-delete')
    await shot(sam.page, 'suggest-update-delete-sam')
    const accepted = await decideOnGhost(rita.page, [update.id], 'accept')
    assert(accepted.status === 200 && accepted.body.status === 'accepted', `the move accepted (got ${accepted.status} ${JSON.stringify(accepted.body)})`)
    const rejected = await decideOnGhost(rita.page, [remove.id], 'reject')
    assert(rejected.status === 200 && rejected.body.status === 'rejected', `the delete rejected (got ${rejected.status} ${JSON.stringify(rejected.body)})`)
    for (const p of [rita.page, sam.page]) {
      await p.waitForFunction(([id, x]) => window.fairyring.doc.getMap('shapes').get(id)?.get('x') === x, [moving, x0 + 240])
      await p.waitForSelector('#layer-suggestions [data-suggestion]', { state: 'detached' })
      assert(await p.evaluate(id => window.fairyring.doc.getMap('shapes').has(id), deleting), 'the rejected delete left the box')
    }
    // The Suggest toggle is the fairy's, not a browser's: Sam turns it off, both see it off.
    for (const want of ['direct', 'suggest']) {
      const [patched] = await Promise.all([
        sam.page.waitForResponse(r => r.request().method() === 'PATCH' && r.url().endsWith(`/fairies/${review.fairy}`)),
        sam.page.click(`[data-fairy-item="${review.fairy}"] [data-action="toggle-suggest"]`)
      ])
      assert(patched.status() === 200 && (await patched.json()).apply === want, `the server took ${want} (got ${patched.status()})`)
      for (const p of [rita.page, sam.page]) {
        await p.waitForSelector(`[data-fairy-item="${review.fairy}"] [data-action="toggle-suggest"][aria-pressed="${want === 'suggest'}"]`)
        assert(await p.evaluate(id => window.fairyring.doc.getMap('fairies').get(id)?.get('apply'), review.fairy) === want, `the entity says ${want}`)
      }
    }
    assert(rita.errors.length === 0 && sam.errors.length === 0, `no console errors or refused requests: ${[...rita.errors, ...sam.errors].join('; ')}`)
    await rita.context.close()
    await sam.context.close()
  })

  await step('first minutes (1400 × 900): three fairies appear apart in their own colours; Start a project in view; Enter with two selected starts one project; the cost is shown', async () => {
    const first = `${room}-first`
    const ada = await open(browser, server.base, first, 'Ada', '', { width: 1400, height: 900 })
    const ids = []
    const spots = []
    for (const name of ['Pip', 'Dart', 'Echo']) {
      await ada.page.fill('[data-fairy-name]', name)
      const [req] = await Promise.all([
        ada.page.waitForRequest(r => r.method() === 'POST' && r.url().endsWith(`/rooms/${first}/fairies`)),
        ada.page.click('[data-action="invite-fairy"]')
      ])
      spots.push(JSON.parse(req.postData()).position)
      const item = await ada.page.waitForSelector(`[data-fairy-item][aria-selected="true"]:has-text("${name}")`)
      ids.push(await item.getAttribute('data-fairy-item'))
    }
    const at = await ada.page.waitForFunction(ids => {
      const out = {}
      for (const st of window.fairyring.provider.awareness.getStates().values()) if (st?.fairy !== undefined && ids.includes(st.fairy.id)) out[st.fairy.id] = { x: st.fairy.x, y: st.fairy.y }
      return Object.keys(out).length === ids.length ? out : null
    }, ids).then(h => h.jsonValue())
    const view = await ada.page.evaluate(() => window.fairyring.canvas.viewportBox())
    console.log(`# spawn points asked ${JSON.stringify(spots)}, at ${JSON.stringify(at)} in view ${JSON.stringify(view)}`)
    ids.forEach((id, i) => {
      const p = at[id]
      assert(p.x === spots[i].x && p.y === spots[i].y, `${id} appeared where the page asked (${JSON.stringify(p)} vs ${JSON.stringify(spots[i])})`)
      assert(p.x > view.x && p.x < view.x + view.w && p.y > view.y && p.y < view.y + view.h, `${id} is in view`)
      for (const other of ids.slice(i + 1)) {
        assert(Math.hypot(p.x - at[other].x, p.y - at[other].y) >= 60, `${id} and ${other} are apart (${JSON.stringify([p, at[other]])})`)
      }
    })
    const colors = await ada.page.evaluate(ids => ids.map(id => ({
      dot: document.querySelector(`[data-fairy-item="${id}"]`)?.getAttribute('data-fairy-color'),
      sprite: document.querySelector(`[data-fairy="${id}"]`)?.getAttribute('data-color'),
      body: document.querySelector(`[data-fairy="${id}"] .body`)?.getAttribute('fill'),
      tab: document.querySelector(`[data-chat-tab="${id}"] .dot`)?.style.background
    })), ids)
    console.log(`# colours ${JSON.stringify(colors)}`)
    assert(new Set(colors.map(c => c.dot)).size === 3 && colors.every(c => c.dot && c.sprite === c.dot && c.body === c.dot && c.tab),
      `three colours, each the same in the list, the sprite and the chat tab (${JSON.stringify(colors)})`)
    const overlaps = await ada.page.evaluate(() => {
      const boxes = [...document.querySelectorAll('[data-fairy] .label, [data-fairy] [data-bubble] rect')].map(e => e.getBoundingClientRect())
      let n = 0
      for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
        const a = boxes[i]; const b = boxes[j]
        if (a.x < b.right && b.x < a.right && a.y < b.bottom && b.y < a.bottom) n++
      }
      return n
    })
    assert(overlaps === 0, `no name label or bubble overlaps another (${overlaps})`)
    await shot(ada.page, 'first-three-fairies')

    // Two selected: the project control and the input are in view without scrolling the sidebar.
    await ada.page.click(`[data-fairy-item="${ids[0]}"] .name`)
    await ada.page.click(`[data-fairy-item="${ids[1]}"] .name`, { modifiers: ['Shift'] })
    await ada.page.evaluate(() => { document.getElementById('sidebar').scrollTop = 0 })
    await ada.page.waitForSelector('[data-action="group-prompt"]:visible')
    for (const sel of ['[data-action="group-prompt"]', '[data-fairy-input]']) {
      const r = await ada.page.locator(sel).boundingBox()
      assert(r !== null && r.y >= 0 && r.y + r.height <= 900, `${sel} is in view without scrolling (${JSON.stringify(r)})`)
    }
    const posts = []
    ada.page.on('request', r => { if (r.method() === 'POST') posts.push(new URL(r.url()).pathname) })
    await ada.page.fill('[data-fairy-input]', 'a house and a tree')
    const [response] = await Promise.all([
      ada.page.waitForResponse(r => r.url().endsWith('/group-prompt')),
      ada.page.press('[data-fairy-input]', 'Enter')
    ])
    const started = await response.json()
    assert(response.status() === 202 && started.orchestratorId === ids[0], `Enter with two selected started one project led by Pip (got ${response.status()} ${JSON.stringify(started)})`)
    await ada.page.waitForSelector(`[data-project-item="${started.projectId}"][data-status="done"]`, { timeout: 60_000 })
    for (const id of ids.slice(0, 2)) await ada.page.waitForSelector(`[data-fairy="${id}"][data-mode="idling"]:not([data-pose="thinking"]):not([data-pose="working"])`)
    assert(!posts.some(p => p.endsWith('/prompt')), `no prompt was sent to each fairy (${JSON.stringify(posts)})`)
    const drawn = await ada.page.evaluate(() => {
      const out = []
      window.fairyring.doc.getMap('shapes').forEach(m => {
        const by = m.get?.('createdBy')
        if (typeof by === 'string' && by.startsWith('fairy:')) out.push({ by, key: JSON.stringify([m.get('kind'), m.get('type'), m.get('x'), m.get('y'), m.get('w'), m.get('h'), m.get('text') ?? null]) })
      })
      return out
    })
    const twins = drawn.filter(d => drawn.some(o => o !== d && o.key === d.key && o.by !== d.by))
    assert(drawn.length > 0 && twins.length === 0, `no two fairies drew the same shape on the same spot (${drawn.length} shapes, twins ${JSON.stringify(twins)})`)

    // One fairy: Enter prompts it alone; its request's last chat item shows what it used, and
    // the cost bar the room's and Ada's tokens against the budgets.
    await ada.page.click(`[data-fairy-item="${ids[2]}"] .name`)
    await ada.page.fill('[data-fairy-input]', 'draw a cat')
    const [prompted] = await Promise.all([
      ada.page.waitForResponse(r => r.url().endsWith(`/fairies/${ids[2]}/prompt`)),
      ada.page.press('[data-fairy-input]', 'Enter')
    ])
    assert(prompted.status() === 202, 'one fairy selected: a prompt to it')
    const usage = await ada.page.waitForSelector(`[data-fairy-chat="${ids[2]}"] [data-usage]`)
    const said = await usage.textContent()
    assert(Number(await usage.getAttribute('data-usage')) > 0 && /\d+ in · \d+ out/.test(said), `the chat item says what the request used (got ${said})`)
    await ada.page.waitForFunction(() => Number(document.querySelector('[data-cost-line="room"]')?.getAttribute('data-tokens')) > 0 &&
      Number(document.querySelector('[data-cost-line="you"]')?.getAttribute('data-tokens')) > 0)
    const bar = await ada.page.textContent('[data-cost]')
    assert(/Room this hour: [\d,.kM]+ of [\d,.kM]+ tokens/.test(bar) && /You today/.test(bar), `the cost bar shows the room's and Ada's use against the budgets (got ${bar})`)
    assert(ada.errors.length === 0, `no console error (${ada.errors.join('; ')})`)
    await shot(ada.page, 'first-cost-shown')
    await ada.context.close()
  })

  await step('a token without the fairies scope gets a clear message', async () => {
    const token = mintToken('erin', 'read write')
    const e = await open(browser, server.base, room, 'Erin', `&token=${encodeURIComponent(token)}`)
    assert(e.errors.length === 0, `no console errors on load: ${e.errors.join('; ')}`)
    await e.page.click('[data-action="invite-fairy"]')
    const msg = await e.page.waitForSelector('#fairy-error:not([hidden])')
    const text = await msg.textContent()
    assert(/fairies" scope/.test(text), `the message names the missing scope (got ${text})`)
    await shot(e.page, '14-erin-lacks-the-fairies-scope')
    await e.context.close()
  })

  await step('a third browser in another room sees nothing', async () => {
    const c = await open(browser, server.base, `${room}-other`, 'Carol')
    const cc = await canvasBox(c.page)
    await c.page.mouse.move(cc.x + 100, cc.y + 100)
    // Our own presence round trip proves the room is live before we check it is empty.
    const shapes = await c.page.locator('[data-shape-id]').count()
    const cursors = await c.page.locator('[data-peer]').count()
    const people = await c.page.locator('[data-person]').count()
    assert(c.errors.length === 0, `no console errors on load: ${c.errors.join('; ')}`)
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
    server = await startServer({ bin: BIN, store, secret: SECRET, extraArgs: ['--llm-pace-ms', '15'] })
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
