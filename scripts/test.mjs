// `npm test`: formatting, typecheck (the service and the dashboard), the layers'
// import rules, the tables' owners, the whole suite, then the container image and compose file
// (timed apart), ending with the plain line
// `tests: N passed, N failed` (a failed typecheck, format or import check
// counts as one failed test).
import { spawnSync } from "node:child_process"
import { readFileSync, rmSync } from "node:fs"

const run = (command, args) => spawnSync(command, args, { stdio: "inherit" }).status === 0

let failed = 0
let passed = 0

if (!run("prettier", ["--check", "--log-level", "warn", "."])) {
  console.error("format check failed: run `npm run format`")
  failed++
}
if (
  !run("tsc", ["--noEmit", "-p", "tsconfig.json"]) ||
  !run("tsc", ["--noEmit", "-p", "web/tsconfig.json"])
) {
  console.error("typecheck failed")
  failed++
}

// The layers of src/ (docs/internals/architecture.md, "Layout"): an import that breaks them, or a
// cycle between files or between folders, fails the run.
if (
  !run("depcruise", ["src", "--config", ".dependency-cruiser.cjs", "--output-type", "err"]) ||
  !run("node", ["scripts/check-folders.mjs"])
) {
  console.error("import rules broken: see .dependency-cruiser.cjs and scripts/check-folders.mjs")
  failed++
}

// Each table named in SQL by its owning module alone (scripts/check-tables.mjs).
if (!run("node", ["scripts/check-tables.mjs"])) {
  console.error("a table is named outside its owner: see scripts/check-tables.mjs")
  failed++
}

/** One vitest run (`args` after `run`), its tests counted; its wall time in seconds. */
const vitest = (args) => {
  const report = ".vitest-report.json"
  rmSync(report, { force: true })
  const started = Date.now()
  const ok = run("vitest", [
    "run",
    "--reporter=default",
    "--reporter=json",
    `--outputFile.json=${report}`,
    ...args
  ])
  try {
    const results = JSON.parse(readFileSync(report, "utf8"))
    passed += results.numPassedTests
    failed += results.numFailedTests
    // A file that fails to load or a hook that throws has no failed test of its own.
    if (!ok && results.numFailedTests === 0) failed++
  } catch {
    console.error("vitest wrote no report")
    failed++
  }
  rmSync(report, { force: true })
  return (Date.now() - started) / 1000
}

const args = process.argv.slice(2)
const suite = vitest(args)
// The container image and compose file, after the rest and timed apart (test/container); not when
// the run names its own files.
if (args.length === 0) {
  const containers = vitest(["--config", "vitest.containers.config.ts"])
  console.log(`suite: ${suite.toFixed(0)} s; containers: ${containers.toFixed(0)} s`)
}

console.log(`tests: ${passed} passed, ${failed} failed`)
process.exit(failed === 0 ? 0 : 1)
