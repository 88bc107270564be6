// Builds the demo into dist/ (index.html, app.js, app.css), minified and deterministic.
// `--check` builds into a temporary folder and fails if the committed dist/ differs, so a stale
// dist/ (the server embeds it) is caught by the tests.
import * as esbuild from 'esbuild'
import { shared } from './bundle-options.mjs'
import { mkdtempSync, mkdirSync, readFileSync, readdirSync, rmSync, copyFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const check = process.argv.includes('--check')
const out = check ? mkdtempSync(join(tmpdir(), 'fairyring-dist-')) : join(root, 'dist')

if (!check) rmSync(out, { recursive: true, force: true })
mkdirSync(out, { recursive: true })
await esbuild.build({
  absWorkingDir: root,
  entryPoints: { app: 'src/main.ts', 'app-style': 'src/app.css' },
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['es2020'],
  outdir: out,
  legalComments: 'none',
  logLevel: 'warning',
  ...shared
})
// esbuild names the CSS entry after its key; keep the page's link simple.
copyFileSync(join(out, 'app-style.css'), join(out, 'app.css'))
rmSync(join(out, 'app-style.css'))
copyFileSync(join(root, 'index.html'), join(out, 'index.html'))

if (check) {
  const committed = join(root, 'dist')
  const names = (d) => { try { return readdirSync(d).sort() } catch { return [] } }
  const fresh = names(out)
  const stale = []
  if (JSON.stringify(fresh) !== JSON.stringify(names(committed))) stale.push(`files: ${names(committed).join(',')} vs ${fresh.join(',')}`)
  for (const n of fresh) {
    let a = null
    try { a = readFileSync(join(committed, n)) } catch {}
    if (a === null || !a.equals(readFileSync(join(out, n)))) stale.push(n)
  }
  rmSync(out, { recursive: true, force: true })
  if (stale.length > 0) {
    console.error(`web-demo/dist is out of date (${stale.join('; ')}): run \`npm run build\` in web-demo/ and commit dist/`)
    process.exit(1)
  }
  console.log('web-demo/dist is up to date')
}
