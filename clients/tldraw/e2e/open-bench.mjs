// The open benchmark without a server: builds example/bench.tsx (`build-example.mjs --bench`)
// and opens it in Chromium (playwright-core, Debian's Chromium) once per run, printing, for each
// open, the milliseconds from the bind (the document is complete then: it stands for the first
// sync) to the viewport's shapes shown and to all shapes in tldraw and shown (the second frame
// after each), and the CPU seconds of all Chromium's processes from the bind to the last label
// of a shape on screen measured (what a loaded machine changes less than the wall clock). The example page's own figure, with the server, is e2e/browser.mjs's
// `ONLY=5,000` step. Configurations given as several values run interleaved (ABAB…).
// Env: RUNS (opens per configuration, default 3), N (shapes, default 5000), LABELS
// (`distinct`, `repeat`, `none`; comma-separated for several), LOAD (`viewport`, `all`), UTILS
// (`fairyring`, `default`: tldraw's own shape utils), SLICE_MS (the binding's `sliceMs`), PROFILE=DIR (a CDP CPU profile of each open
// written there, with its top self times printed; builds unminified), NO_BUILD=1, CHROMIUM,
// CONFIGS (a JSON list of configurations, e.g. main's binding: utils `default`, slice `100`).
import { execFileSync } from 'node:child_process'
import { createServer } from 'node:http'
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, extname, join, normalize } from 'node:path'
import { fileURLToPath } from 'node:url'
import { loadavg } from 'node:os'
import { chromium } from 'playwright-core'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const DIST = join(root, 'example', 'dist-bench')
const PROFILE = process.env.PROFILE
const list = (v, d) => (v ?? d).split(',').map(s => s.trim()).filter(Boolean)
const RUNS = Number(process.env.RUNS ?? 3)
const N = Number(process.env.N ?? 5000)
const configs = []
for (const labels of list(process.env.LABELS, 'distinct')) {
  for (const load of list(process.env.LOAD, 'viewport')) {
    for (const utils of list(process.env.UTILS, 'fairyring')) {
      for (const slice of list(process.env.SLICE_MS, '-')) configs.push({ labels, load, utils, ...(slice === '-' ? {} : { slice }) })
    }
  }
}

// CONFIGS='[{"labels":…,"load":…,"utils":…,"slice":…}, …]' instead of the cross product above.
if (process.env.CONFIGS) configs.splice(0, configs.length, ...JSON.parse(process.env.CONFIGS))

if (process.env.NO_BUILD !== '1') {
  execFileSync(process.execPath, [join(root, 'scripts', 'build-example.mjs'), '--bench', ...(PROFILE ? ['--no-minify'] : [])], { stdio: 'inherit' })
}

const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.css': 'text/css', '.json': 'application/json', '.woff2': 'font/woff2', '.svg': 'image/svg+xml', '.png': 'image/png' }
const server = createServer((req, res) => {
  const rel = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname).slice(1) || 'bench.html')
  if (rel.startsWith('..')) { res.writeHead(400).end(); return }
  try {
    res.writeHead(200, { 'content-type': TYPES[extname(rel)] ?? 'application/octet-stream' }).end(readFileSync(join(DIST, rel)))
  } catch { res.writeHead(404).end() }
})
await new Promise(resolve => server.listen(0, '127.0.0.1', resolve))
const base = `http://127.0.0.1:${server.address().port}`

// A switch only this browser's main process carries: its processes are it and its descendants.
const TAG = `--fairyring-open-bench=${process.pid}`
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: [TAG, '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run']
})

/** CPU seconds (user + system) of this browser's processes so far (Linux /proc; `NaN` elsewhere). */
function browserCpu () {
  try {
    const procs = new Map()
    let root = null
    for (const pid of readdirSync('/proc')) {
      if (!/^\d+$/.test(pid)) continue
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
        const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
        procs.set(pid, { ppid: f[1], ticks: Number(f[11]) + Number(f[12]) })
        if (root === null && readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(TAG)) root = pid
      } catch { /* gone */ }
    }
    if (root === null) return NaN
    const ours = new Set([root])
    for (let grew = true; grew;) {
      grew = false
      for (const [pid, p] of procs) if (!ours.has(pid) && ours.has(p.ppid)) { ours.add(pid); grew = true }
    }
    let ticks = 0
    for (const pid of ours) ticks += procs.get(pid)?.ticks ?? 0
    return ticks / 100
  } catch { return NaN }
}

/** Self time per function (top `k`) and the share of GC, program and idle, from a CDP profile. */
function summarize (profile, k = 25) {
  const self = new Map()
  const dt = profile.timeDeltas
  const byId = new Map(profile.nodes.map(n => [n.id, n]))
  const t = new Map()
  for (let i = 0; i < profile.samples.length; i++) t.set(profile.samples[i], (t.get(profile.samples[i]) ?? 0) + (dt[i] ?? 0))
  let total = 0
  for (const [id, us] of t) {
    const n = byId.get(id)
    const cf = n.callFrame
    const key = `${cf.functionName || '(anonymous)'} ${cf.url.split('/').pop()}:${cf.lineNumber + 1}`
    self.set(key, (self.get(key) ?? 0) + us)
    if (cf.functionName !== '(idle)') total += us
  }
  const top = [...self].sort((a, b) => b[1] - a[1]).slice(0, k)
  return { totalMs: total / 1000, top: top.map(([name, us]) => `${(us / 1000).toFixed(0).padStart(6)} ms  ${name}`) }
}

const results = new Map(configs.map(c => [JSON.stringify(c), []]))
console.log(`load average before: ${loadavg().map(x => x.toFixed(2)).join(' ')}`)
for (let r = 0; r < RUNS; r++) {
  for (const c of configs) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
    const page = await context.newPage()
    const errors = []
    page.on('pageerror', e => errors.push(e.message))
    let cdp
    if (PROFILE) {
      cdp = await context.newCDPSession(page)
      await cdp.send('Profiler.enable')
      await cdp.send('Profiler.setSamplingInterval', { interval: 500 })
    }
    await page.goto(`${base}/bench.html?n=${N}&labels=${c.labels}&load=${c.load}&utils=${c.utils}${c.slice !== undefined ? `&slice=${c.slice}` : ''}&wait=1`)
    await page.waitForFunction(() => window.editor !== undefined, null, { timeout: 300_000 })
    await page.waitForTimeout(500)
    if (cdp) await cdp.send('Profiler.start')
    const cpu0 = browserCpu()
    await page.evaluate(() => { window.benchGo = true })
    await page.waitForFunction(() => window.bench !== undefined, null, { timeout: 600_000, polling: 100 })
    const cpuS = browserCpu() - cpu0
    const b = await page.evaluate(() => window.bench)
    if (b.error !== undefined || errors.length > 0) throw new Error(`open failed: ${b.error ?? ''} ${errors.join('; ')}`)
    if (b.missing !== 0 || b.all !== N) throw new Error(`not every shape is in: ${JSON.stringify(b)}`)
    b.cpuS = cpuS
    results.get(JSON.stringify(c)).push(b)
    console.log(`open ${r} ${JSON.stringify(c)}: first sync → viewport shown ${b.shownMs.toFixed(0)} ms (${b.held} shapes held, ${b.inView} in view; bind ${b.bindMs.toFixed(0)} ms); first sync → all ${N} in the store and shown ${b.loadedMs.toFixed(0)} ms; labels on screen measured ${b.labelsMs.toFixed(0)} ms; Chromium CPU from the bind to then ${cpuS.toFixed(2)} s`)
    if (cdp) {
      const { profile } = await cdp.send('Profiler.stop')
      mkdirSync(PROFILE, { recursive: true })
      const file = join(PROFILE, `open-${c.labels}-${c.load}-${c.utils}-${r}.cpuprofile`)
      writeFileSync(file, JSON.stringify(profile))
      const s = summarize(profile)
      console.log(`  profile ${file}: ${s.totalMs.toFixed(0)} ms sampled (not idle); top self times:\n  ${s.top.join('\n  ')}`)
    }
    await context.close()
  }
}
console.log(`load average after: ${loadavg().map(x => x.toFixed(2)).join(' ')}`)
const med = a => { const s = [...a].sort((x, y) => x - y); return s[Math.floor((s.length - 1) / 2)] }
for (const [k, runs] of results) {
  console.log(`figure: ${k}: first sync → viewport shown median ${med(runs.map(b => b.shownMs)).toFixed(0)} ms (${runs.map(b => b.shownMs.toFixed(0)).join(', ')}); first sync → all ${N} in the store and shown median ${med(runs.map(b => b.loadedMs)).toFixed(0)} ms (${runs.map(b => b.loadedMs.toFixed(0)).join(', ')}); labels on screen measured median ${med(runs.map(b => b.labelsMs)).toFixed(0)} ms; Chromium CPU median ${med(runs.map(b => b.cpuS)).toFixed(2)} s (${runs.map(b => b.cpuS.toFixed(2)).join(', ')})`)
}
await browser.close()
server.close()
