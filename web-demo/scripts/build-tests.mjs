// Bundles the TypeScript unit tests (test/*.test.ts) for Node's built-in test runner.
import * as esbuild from 'esbuild'
import { shared } from './bundle-options.mjs'
import { readdirSync, rmSync } from 'node:fs'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const outdir = join(root, '.test-out')
rmSync(outdir, { recursive: true, force: true })
const entries = readdirSync(join(root, 'test')).filter(f => f.endsWith('.test.ts')).map(f => join('test', f))
await esbuild.build({
  absWorkingDir: root,
  entryPoints: entries,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: ['node20'],
  outdir,
  outExtension: { '.js': '.mjs' },
  logLevel: 'warning',
  ...shared
})
