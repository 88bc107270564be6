// What every esbuild bundle of the demo shares: `@fairyring/client` is read from its TypeScript
// sources (the `source` export condition: no build of clients/js is needed first), and the Yjs
// packages are always this folder's copies — the client package lists them as peer
// dependencies, and a second copy of `yjs` (clients/js/node_modules, from its own tests) would
// break `instanceof Y.Map` and make Yjs warn.
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const SHARED = /^(yjs|y-websocket|y-protocols|lib0)(\/.*)?$/

/** esbuild plugin: the shared packages resolve from web-demo/ whoever imports them. */
export const dedupe = {
  name: 'fairyring-dedupe',
  setup (build) {
    build.onResolve({ filter: SHARED }, async args => {
      if (args.pluginData === 'dedupe') return undefined
      const r = await build.resolve(args.path, { kind: args.kind, resolveDir: root, pluginData: 'dedupe' })
      return r.errors.length > 0 ? { errors: r.errors } : { path: r.path, sideEffects: r.sideEffects }
    })
  }
}

/** Options for `esbuild.build` shared by the page and the unit tests. */
export const shared = { conditions: ['source'], plugins: [dedupe] }
