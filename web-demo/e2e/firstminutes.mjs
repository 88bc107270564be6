// The first ten minutes of a newcomer, in a real browser (playwright-core driving Debian's
// Chromium) against the real server binary, one server and one browser for every check:
// - a `--dev` server restarted with a new signing secret while a page is open: the page gets a
//   new dev token and reconnects by itself (no banner, no click), and edits go on;
// - no console message of any page ever shows a token (a JWT, or `token=`);
// - `?room=team alpha` opens the room `team-alpha`, shown in the URL, never `demo`;
// - at 800 × 600 the sidebar starts collapsed and the canvas keeps ≥ 70 % of the width, History
//   open too; the toggle opens the sidebar over the canvas; the toolbar is one line at 1400,
//   1280, 1000 and 800 px;
// - keyboard only: invite two fairies, select one in the list, prompt it, then move the canvas's
//   roving focus over its shapes and select one with Enter;
// - a fairy's speech bubble stays inside the visible canvas: at its right edge (1400 × 900) it
//   turns to the sprite's left, and at 800 × 600 it stays out from under the sidebar open over it;
// - the PNG and SVG buttons download the page's export; the zoom label follows the zoom.
// Screenshots (1400 × 900 and 800 × 600) go to FAIRYRING_ARTIFACTS as firstminutes-*.png.
//
// Env: FAIRYRING_BIN (server binary, required), FAIRYRING_ARTIFACTS (screenshot folder),
// CHROMIUM (browser path, default /usr/bin/chromium). Every wait is bounded.
import { chromium } from 'playwright-core'
import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
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
const work = mkdtempSync(join(tmpdir(), 'fairyring-e2e-first-'))
const store = `sqlite:${join(work, 'first.db')}`

let passed = 0
let failed = 0
const step = async (name, fn) => {
  const t0 = Date.now()
  try {
    await fn()
    passed++
    console.log(`ok - ${name} (${Date.now() - t0} ms)`)
  } catch (e) {
    // The checks are independent: each failure is reported and the next one still runs.
    failed++
    console.log(`not ok - ${name}: ${e instanceof Error ? e.stack : e}`)
  }
}

function assert (cond, msg) { if (!cond) throw new Error(msg) }


/** Every console message of every page, to check that none shows a token. */
const consoleLines = []
const JWT = /eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/

/** Opens the demo at `size`; waits until connected and synced. */
async function open (browser, base, query, name, size = { width: 1400, height: 900 }) {
  const context = await browser.newContext({ viewport: size, acceptDownloads: true })
  const page = await context.newPage()
  page.setDefaultTimeout(WAIT)
  page.on('console', m => consoleLines.push(`[${name}] ${m.type()}: ${m.text()} @ ${m.location()?.url ?? ''}`))
  page.on('pageerror', e => consoleLines.push(`[${name}] page error: ${e.message}`))
  await page.goto(`${base}/?${query}&name=${name}`)
  await page.waitForSelector('#status[data-status="connected"]')
  await page.waitForFunction(() => window.fairyring?.provider?.synced === true)
  return { context, page }
}

async function box (page, selector) {
  const b = await page.locator(selector).boundingBox()
  if (b === null) throw new Error(`${selector} is not visible`)
  return b
}

/** Draws a rectangle with the mouse from (x1, y1) to (x2, y2) of the canvas; resolves with its id. */
async function drawRect (page, x1, y1, x2, y2) {
  const c = await box(page, '#canvas')
  await page.click('[data-tool="rectangle"]')
  await page.mouse.move(c.x + x1, c.y + y1)
  await page.mouse.down()
  await page.mouse.move(c.x + x2, c.y + y2, { steps: 4 })
  await page.mouse.up()
  const id = await page.evaluate(() => window.fairyring.canvas.selection[0])
  assert(id, 'the new rectangle is selected')
  await page.keyboard.press('Escape')
  return id
}

/** What has the keyboard focus: `#id`, `[data-…]` or the tag. */
const focusedWhat = page => page.evaluate(() => {
  const a = document.activeElement
  if (a === null || a === document.body) return 'body'
  return a.id !== '' ? `#${a.id}` : a.outerHTML.slice(0, 80)
})

/** Presses `key` (Tab or Shift+Tab) until `selector` has focus (at most `limit` presses). */
async function tabTo (page, selector, key = 'Tab', limit = 150) {
  for (let i = 0; i < limit; i++) {
    if (await page.evaluate(s => document.activeElement?.matches(s) === true, selector)) return
    await page.keyboard.press(key)
  }
  throw new Error(`${key} never reached ${selector} (focus on ${await focusedWhat(page)})`)
}

const shot = (page, name) => page.screenshot({ path: join(ARTIFACTS, `firstminutes-${name}.png`) })

const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] })
let server = null
let exitCode = 0
try {
  server = await startServer({ bin: BIN, store, secret: randomBytes(24).toString('hex') })
  const base = server.base
  const listen = new URL(base).host

  // ---- a dev server restarted under an open page ----
  const ada = await open(browser, base, 'room=restart', 'Ada')
  await step('a --dev restart with a new secret: the page reconnects by itself, no click', async () => {
    const before = await drawRect(ada.page, 200, 200, 360, 320)
    const oldToken = await ada.page.evaluate(() => window.fairyring.conn.token)
    assert(typeof oldToken === 'string' && oldToken.length > 20, 'the page has a dev token')
    // Any banner shown from here on is a failure: the page must recover quietly.
    await ada.page.evaluate(() => {
      window.__banners = []
      const b = document.getElementById('banner')
      new MutationObserver(() => { if (!b.hidden) window.__banners.push(b.textContent) }).observe(b, { attributes: true, childList: true, subtree: true })
    })
    await stopServer(server)
    server = null
    await ada.page.waitForSelector('#status:not([data-status="connected"])')
    server = await startServer({ bin: BIN, store, secret: randomBytes(24).toString('hex'), listen })
    await ada.page.waitForSelector('#status[data-status="connected"]', { timeout: 30_000 })
    await ada.page.waitForFunction(() => window.fairyring.provider.synced === true)
    const after = await ada.page.evaluate(() => ({
      token: window.fairyring.conn.token, banners: window.__banners, bannerHidden: document.getElementById('banner').hidden
    }))
    assert(after.token !== oldToken, 'a new dev token is in use')
    assert(after.bannerHidden && after.banners.length === 0, `no banner was shown: ${JSON.stringify(after.banners)}`)
    // Edits go on, and reach the restarted server: a second browser sees both rectangles.
    const later = await drawRect(ada.page, 420, 200, 560, 320)
    const bob = await open(browser, base, 'room=restart', 'Bob')
    await bob.page.waitForSelector(`[data-shape-id="${before}"]`)
    await bob.page.waitForSelector(`[data-shape-id="${later}"]`)
    await bob.context.close()
    await shot(ada.page, '1400x900-after-restart')
  })

  await step('export: the PNG and SVG buttons download the page', async () => {
    const [png] = await Promise.all([ada.page.waitForEvent('download'), ada.page.click('[data-action="export-png"]')])
    assert(png.suggestedFilename() === 'restart.png', `PNG file name (got ${png.suggestedFilename()})`)
    const pngBytes = readFileSync(await png.path())
    assert(pngBytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])), 'a PNG image')
    const [svg] = await Promise.all([ada.page.waitForEvent('download'), ada.page.click('[data-action="export-svg"]')])
    assert(svg.suggestedFilename() === 'restart.svg', `SVG file name (got ${svg.suggestedFilename()})`)
    const svgText = readFileSync(await svg.path(), 'utf8')
    assert(/<svg[\s>]/.test(svgText) && svgText.includes('</svg>'), 'an SVG image')
  })

  await step('the zoom label shows the zoom', async () => {
    const label = () => ada.page.locator('[data-action="zoom-reset"]').textContent()
    assert(await label() === '100%', `100% at first (got ${await label()})`)
    await ada.page.click('[data-action="zoom-in"]')
    await ada.page.waitForFunction(() => document.querySelector('[data-action="zoom-reset"]').textContent === '125%')
    // Ctrl+wheel zooms by any factor: the label follows the camera.
    const c = await box(ada.page, '#canvas')
    await ada.page.mouse.move(c.x + c.width / 2, c.y + c.height / 2)
    await ada.page.keyboard.down('Control')
    await ada.page.mouse.wheel(0, 120)
    await ada.page.keyboard.up('Control')
    await ada.page.waitForFunction(() => {
      const t = document.querySelector('[data-action="zoom-reset"]').textContent
      return t !== '125%' && t === `${Math.round(window.fairyring.canvas.cam.zoom * 100)}%`
    })
    await ada.page.click('[data-action="zoom-reset"]')
    await ada.page.waitForFunction(() => document.querySelector('[data-action="zoom-reset"]').textContent === '100%')
  })
  await ada.context.close()

  // ---- room names ----
  await step('a room name with a space opens its slug, shown in the URL, not demo', async () => {
    const cy = await open(browser, base, 'room=team alpha', 'Cy')
    const seen = await cy.page.evaluate(() => ({ url: location.href, room: window.fairyring.conn.room, shown: document.getElementById('room-name').textContent }))
    const u = new URL(seen.url)
    assert(u.searchParams.get('room') === 'team-alpha', `the URL names team-alpha (got ${seen.url})`)
    assert(seen.room === 'team-alpha' && seen.shown === 'team-alpha', `the page opened team-alpha (got ${seen.room}, shows ${seen.shown})`)
    const cafe = await cy.context.newPage()
    cafe.on('console', m => consoleLines.push(`[Cy2] ${m.type()}: ${m.text()}`))
    await cafe.goto(`${base}/?room=${encodeURIComponent('café-☕')}&name=Cy`)
    await cafe.waitForSelector('#status[data-status="connected"]')
    const room2 = await cafe.evaluate(() => ({ room: window.fairyring.conn.room, url: new URL(location.href).searchParams.get('room') }))
    assert(room2.room === 'cafe' && room2.url === 'cafe', `café-☕ opens cafe (got ${JSON.stringify(room2)})`)
    await cy.context.close()
  })

  // ---- a small screen ----
  await step('800 × 600: the sidebar is collapsed and the canvas keeps most of the width, History open too', async () => {
    const eve = await open(browser, base, 'room=small', 'Eve', { width: 800, height: 600 })
    const p = eve.page
    // The toolbar keeps one line (icons below 1340 px, words above) at every width from 800 px up.
    for (const width of [1400, 1280, 1000, 800]) {
      await p.setViewportSize({ width, height: 600 })
      const bar = await p.evaluate(() => {
        const t = document.getElementById('toolbar')
        const rows = new Set([...t.querySelectorAll('button')].map(b => Math.round(b.getBoundingClientRect().top)))
        return { rows: rows.size, overflow: t.scrollWidth - t.clientWidth, height: Math.round(t.getBoundingClientRect().height) }
      })
      assert(bar.rows === 1 && bar.overflow <= 0, `at ${width} px the toolbar is one line, nothing cut off (${JSON.stringify(bar)})`)
      if (width === 1000) await shot(p, 'toolbar-1000')
    }
    await drawRect(p, 120, 120, 300, 260)
    assert(await p.locator('#sidebar').isHidden(), 'the sidebar starts collapsed')
    const toggle = p.locator('[data-action="sidebar-toggle"]')
    assert(await toggle.getAttribute('aria-expanded') === 'false', 'the toggle says collapsed')
    const w1 = (await box(p, '#canvas')).width
    assert(w1 >= 0.7 * 800, `canvas ${w1} px of 800 with the sidebar collapsed`)
    await shot(p, '800x600')
    await p.click('[data-testid="history-toggle"]')
    await p.waitForSelector('[data-testid="history-entry"]')
    const w2 = (await box(p, '#canvas')).width
    assert(w2 >= 0.7 * 800, `canvas ${w2} px of 800 with History open`)
    await shot(p, '800x600-history')
    await p.click('[data-testid="history-toggle"]')
    // The toggle opens the sidebar over the canvas (its controls reachable), and closes it.
    await toggle.click()
    await p.waitForSelector('#sidebar [data-action="invite-fairy"]', { state: 'visible' })
    assert(await toggle.getAttribute('aria-expanded') === 'true', 'the toggle says open')
    await shot(p, '800x600-sidebar-open')
    await toggle.click()
    await p.waitForSelector('#sidebar', { state: 'hidden' })
    await eve.context.close()
  })

  // ---- keyboard only ----
  /** The keyboard step's page (Kit, with a fairy that has spoken), kept for the bubble step. */
  let kit
  await step('keyboard only: invite, select, prompt, then focus and select a shape on the canvas', async () => {
    kit = await open(browser, base, 'room=keys', 'Kit')
    const p = kit.page
    // Start from the top of the page, as a keyboard user would.
    await p.evaluate(() => { document.activeElement?.blur?.() })
    const invite = async (name, count) => {
      // The name field is just before Invite: back from there, forward from the top.
      await tabTo(p, '[data-fairy-name]', count === 1 ? 'Tab' : 'Shift+Tab')
      await p.keyboard.type(name)
      await p.keyboard.press('Tab')
      assert(await p.evaluate(() => document.activeElement?.matches('[data-action="invite-fairy"]')), `Tab from the name reaches Invite (focus on ${await focusedWhat(p)})`)
      await p.keyboard.press('Enter')
      await p.waitForFunction(n => document.querySelectorAll('[data-fairy-item]').length === n, count)
      // The inviter's page selects the new fairy by itself: wait for that, so that it cannot
      // come after the keyboard's own selection below.
      await p.waitForFunction(who => [...document.querySelectorAll('[data-fairy-item]')]
        .some(e => e.querySelector('.name')?.textContent === who && e.getAttribute('aria-selected') === 'true'), name)
    }
    await invite('Kiri', 1)
    await invite('Lumo', 2)
    const ids = await p.$$eval('[data-fairy-item]', es => Object.fromEntries(es.map(e => [e.querySelector('.name')?.textContent ?? '', e.getAttribute('data-fairy-item')])))
    assert(ids.Kiri && ids.Lumo, `both fairies listed: ${JSON.stringify(ids)}`)
    // Select Kiri alone from the list with the keyboard.
    await tabTo(p, `[data-fairy-item="${ids.Kiri}"]`)
    await p.keyboard.press('Enter')
    await p.waitForFunction(([k, l]) =>
      document.querySelector(`[data-fairy-item="${k}"]`)?.getAttribute('aria-selected') === 'true' &&
      document.querySelector(`[data-fairy-item="${l}"]`)?.getAttribute('aria-selected') === 'false', [ids.Kiri, ids.Lumo])
    assert(await p.evaluate(k => document.activeElement?.getAttribute('data-fairy-item') === k, ids.Kiri), `focus stays on Kiri's row (on ${await focusedWhat(p)})`)
    // Shift+Enter adds Lumo, Shift+Enter again drops it.
    await tabTo(p, `[data-fairy-item="${ids.Lumo}"]`)
    await p.keyboard.press('Shift+Enter')
    await p.waitForFunction(l => document.querySelector(`[data-fairy-item="${l}"]`)?.getAttribute('aria-selected') === 'true', ids.Lumo)
    await p.keyboard.press('Shift+Enter')
    await p.waitForFunction(l => document.querySelector(`[data-fairy-item="${l}"]`)?.getAttribute('aria-selected') === 'false', ids.Lumo)
    // Prompt the selected fairy.
    await tabTo(p, '[data-fairy-input]')
    await p.keyboard.type('draw a house')
    await p.keyboard.press('Enter')
    await p.waitForSelector(`[data-chat-role="user"]`)
    // The whole house, not its first shapes: under --dev the offline model is paced, and a shape
    // arriving while the keys below move the focus would renumber the canvas's shapes.
    await p.waitForFunction(() => [...document.querySelectorAll('[data-chat-role="fairy"]')].some(e => /Drew a house/.test(e.textContent ?? '')), null, { timeout: 30_000 })
    await p.waitForFunction(() => {
      const out = []
      window.fairyring.doc.getMap('shapes').forEach(m => { if (String(m.get('createdBy')).startsWith('fairy:')) out.push(m.get('locked') === true) })
      return out.length >= 3 && out.every(locked => !locked)
    }, null, { timeout: 30_000 })
    // Back to the canvas (it comes before the sidebar), then over its shapes.
    await tabTo(p, '#canvas', 'Shift+Tab')
    const focusedShape = () => p.evaluate(() => document.getElementById('canvas').dataset.focusedShape)
    const focusMoved = from => p.waitForFunction(f => {
      const now = document.getElementById('canvas').dataset.focusedShape
      return now !== undefined && now !== f
    }, from)
    await focusMoved(null)
    const first = await focusedShape()
    await p.waitForSelector(`[data-focus-ring="${first}"]`)
    await p.keyboard.press('ArrowRight')
    await focusMoved(first)
    const second = await focusedShape()
    await p.keyboard.press('Tab')
    await focusMoved(second)
    const third = await focusedShape()
    assert(await p.evaluate(() => document.activeElement?.id === 'canvas'), 'Tab moves on within the canvas')
    await p.keyboard.press('Enter')
    await p.waitForFunction(id => JSON.stringify(window.fairyring.canvas.selection) === JSON.stringify([id]), third)
    await p.waitForSelector(`[data-focus-ring="${third}"]`)
    // The accessible name follows the selection at the canvas's next render: waited for, then read.
    await p.waitForFunction(() => /selected, \d+ of \d+$/.test(document.getElementById('canvas')?.getAttribute('aria-label') ?? ''), null, { timeout: 5_000 }).catch(() => {})
    const label = await p.getAttribute('#canvas', 'aria-label')
    assert(/selected, \d+ of \d+$/.test(label ?? ''), `the canvas names the focused shape (got ${label})`)
    await shot(p, '1400x900-keyboard')
  })

  await step('speech bubbles stay inside the visible canvas: at its right edge (1400 × 900), beside the sidebar open over it (800 × 600)', async () => {
    assert(kit !== undefined, 'the keyboard step opened its page')
    const p = kit.page
    const said = await p.waitForSelector('[data-fairy] [data-bubble="message"]')
    const id = await said.evaluate(e => e.closest('[data-fairy]').getAttribute('data-fairy'))
    /** Puts the sprite `dx` px left of screen x `edge`, then reads its bubble's and the sprite's screen boxes. */
    const near = async edge => {
      await p.evaluate(([fid, edgeX]) => {
        const c = window.fairyring.canvas
        const r = document.getElementById('canvas').getBoundingClientRect()
        let at = null
        for (const st of window.fairyring.provider.awareness.getStates().values()) if (st?.fairy?.id === fid) at = st.fairy
        c.setCamera({ x: at.x - (edgeX - 40 - r.left) / c.cam.zoom, y: at.y - r.height / 2 / c.cam.zoom, zoom: c.cam.zoom })
      }, [id, edge])
      await p.evaluate(() => new Promise(resolve => requestAnimationFrame(() => requestAnimationFrame(resolve))))
      return p.evaluate(fid => {
        const g = document.querySelector(`[data-fairy="${fid}"]`)
        const b = g.querySelector('[data-bubble] rect').getBoundingClientRect()
        return { bubble: { left: b.left, right: b.right }, side: g.querySelector('[data-bubble]').getAttribute('data-bubble-side'), sprite: g.querySelector('.body').getBoundingClientRect().left }
      }, id)
    }
    const canvas = await box(p, '#canvas')
    const wide = await near(canvas.x + canvas.width)
    assert(wide.bubble.right <= canvas.x + canvas.width && wide.bubble.left >= canvas.x && wide.side === 'left',
      `at the canvas's right edge the bubble turns left, inside the canvas (${JSON.stringify(wide)}, canvas ends at ${canvas.x + canvas.width})`)
    await shot(p, 'bubble-right-edge-1400x900')
    await p.setViewportSize({ width: 800, height: 600 })
    await p.waitForSelector('#sidebar', { state: 'hidden' })
    await p.click('[data-action="sidebar-toggle"]')
    await p.waitForSelector('#sidebar', { state: 'visible' })
    const side = await box(p, '#sidebar')
    const small = await near(side.x)
    assert(small.bubble.right <= side.x && small.sprite < side.x, `beside the sidebar open over the canvas the bubble stays out from under it (${JSON.stringify(small)}, sidebar starts at ${side.x})`)
    await shot(p, 'bubble-beside-sidebar-800x600')
    await kit.context.close()
  })

  await step('no console message shows a token', async () => {
    const leaks = consoleLines.filter(l => JWT.test(l) || /token=/.test(l))
    assert(leaks.length === 0, `console lines with a token:\n${leaks.join('\n')}`)
  })
} catch (e) {
  console.log(`not ok - setting up: ${e instanceof Error ? e.stack : e}`)
  exitCode = 1
} finally {
  await browser.close().catch(() => {})
  if (server !== null) await stopServer(server).catch(() => {})
  rmSync(work, { recursive: true, force: true })
}
console.log(`screenshots: ${ARTIFACTS}`)
console.log(`${passed} passed, ${failed} failed`)
process.exit(failed > 0 ? 1 : exitCode)
