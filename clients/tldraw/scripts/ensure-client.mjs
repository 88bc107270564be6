// Builds @fairyring/client (../js) when its dist/ is missing, so this package's tsc finds its
// types as any consumer would: `npm ci` there once, then its `npm run build` (tsc).
import { existsSync } from 'node:fs'
import { execFileSync } from 'node:child_process'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'

const client = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'js')
if (!existsSync(join(client, 'dist', 'index.d.ts'))) {
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
  if (!existsSync(join(client, 'node_modules'))) execFileSync(npm, ['ci', '--no-audit', '--no-fund'], { cwd: client, stdio: 'inherit' })
  execFileSync(npm, ['run', 'build'], { cwd: client, stdio: 'inherit' })
}
