// Builds the example page (example/main.tsx) into example/dist/: index.html, main.js, main.css
// and tldraw's fonts, icons and translations from @tldraw/assets as files beside them, so the
// page is static and reaches no CDN. tldraw itself comes from node_modules (npm), never from the
// repository. TLDRAW_LICENSE_KEY (environment, at build time) is passed to <Tldraw licenseKey>.
// `@fairyring/client` and this package are bundled from their TypeScript sources; the Yjs
// packages always resolve from this folder (one copy of `yjs`). `--bench` builds the open
// benchmark's page (example/bench.tsx, driven by e2e/open-bench.mjs) into example/dist-bench/
// instead, `--bench --no-minify` readable for CPU profiles.
import * as esbuild from 'esbuild'
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const bench = process.argv.includes('--bench')
const out = join(root, 'example', bench ? 'dist-bench' : 'dist')
const page = bench ? 'bench' : 'main'
const SHARED = /^(yjs|y-websocket|y-protocols|lib0|react|react-dom|tldraw)(\/.*)?$/

const dedupe = {
  name: 'fairyring-dedupe',
  setup (build) {
    build.onResolve({ filter: SHARED }, async args => {
      if (args.pluginData === 'dedupe') return undefined
      const r = await build.resolve(args.path, { kind: args.kind, resolveDir: root, pluginData: 'dedupe' })
      return r.errors.length > 0 ? { errors: r.errors } : { path: r.path, sideEffects: r.sideEffects }
    })
  }
}
// tldraw fetches its translations by URL: those JSON files are emitted as files, not inlined.
const assetJson = {
  name: 'tldraw-asset-json',
  setup (build) {
    build.onLoad({ filter: /@tldraw[\\/]assets[\\/].*\.json$/ }, args => ({ contents: readFileSync(args.path), loader: 'file' }))
  }
}

rmSync(out, { recursive: true, force: true })
mkdirSync(out, { recursive: true })
const started = Date.now()
await esbuild.build({
  absWorkingDir: root,
  entryPoints: { [page]: `example/${page}.tsx` },
  bundle: true,
  minify: !process.argv.includes('--no-minify'),
  format: 'esm',
  target: ['es2022'],
  jsx: 'automatic',
  outdir: out,
  conditions: ['source'],
  loader: { '.woff2': 'file', '.woff': 'file', '.png': 'file', '.svg': 'file', '.ttf': 'file' },
  assetNames: 'assets/[name]-[hash]',
  define: {
    'process.env.NODE_ENV': '"production"',
    TLDRAW_LICENSE_KEY: JSON.stringify(process.env.TLDRAW_LICENSE_KEY ?? '')
  },
  legalComments: 'none',
  logLevel: 'warning',
  plugins: [dedupe, assetJson]
})
if (bench) {
  const html = readFileSync(join(root, 'example', 'index.html'), 'utf8').replaceAll('./main.', './bench.')
  writeFileSync(join(out, 'bench.html'), html)
} else {
  copyFileSync(join(root, 'example', 'index.html'), join(out, 'index.html'))
}
console.log(`built example/${bench ? 'dist-bench' : 'dist'} in ${Date.now() - started} ms`)
