#!/usr/bin/env node
// `rbs`: runs the built CLI (dist/, in an installed package) or the source
// (src/, in a checkout), on Node 24. When started by an older Node (the
// machine's own), it re-runs itself with the Node the project depends on.
import { spawnSync } from "node:child_process"
import { existsSync } from "node:fs"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("..", import.meta.url))
const major = Number(process.versions.node.split(".")[0])
if (major < 24) {
  const local = `${root}node_modules/.bin/node`
  if (!existsSync(local)) {
    process.stderr.write(`rbs: needs Node 24 or newer (this is ${process.version}); run npm install first\n`)
    process.exit(1)
  }
  const result = spawnSync(local, [fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
    stdio: "inherit"
  })
  process.exit(result.status ?? 1)
}
const built = `${root}dist/main/rbs.js`
await import(existsSync(built) ? built : `${root}src/main/rbs.ts`)
