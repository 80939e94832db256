// Sandbox calls on two nodes: an exec round trip and a run-once (`POST /v1/exec`) made through the
// node that runs the sandbox and through the other one, by turns, on a two-node `npm run cluster`.
// See bench/README.md ("sandbox", "On two nodes").
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { startCluster } from "../session-lifecycle/LocalCluster.ts"
import { call, intFromEnv, json, signUp, sleep } from "../session-lifecycle/TargetService.ts"

const log = (message: string) => process.stderr.write(`[bench] ${message}\n`)
const execs = intFromEnv("BENCH_EXECS", 300)
const runs = intFromEnv("BENCH_RUNS", 20)
const warmup = intFromEnv("BENCH_WARMUP", 20)

const percentile = (values: ReadonlyArray<number>, p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN
}

const cluster = await startCluster(2, {
  BROWSER_POOL_SIZE: "0",
  MAX_BROWSERS: "0",
  MAX_CONTEXTS: "0",
  MAX_SANDBOXES: "3",
  SANDBOX_POOL_SIZE: "1",
  SANDBOX_IMAGES_DIR: Path.resolve(".data", "images"),
  LIMIT_EXEC_PER_MINUTE: "1000000",
  LIMIT_SESSION_CREATES_PER_MINUTE: "100000",
  LIMIT_CONCURRENT_SESSIONS: "1000"
})
const { nodes } = cluster
let failed = false
try {
  const key = await signUp(nodes[0]!)
  const created = await call(nodes[0]!, "POST", "/v1/sessions", { key, body: { session_type: "sandbox" } })
  if (created.status !== 201) throw new Error(`create: HTTP ${created.status}`)
  const id: string = json(created.bytes).id
  while (json((await call(nodes[0]!, "GET", `/v1/sessions/${id}`, { key })).bytes).status !== "ready")
    await sleep(10)
  const owner = (await cluster.ownersOf([id])).get(id)
  if (owner === undefined) throw new Error("the sandbox's node was not found")
  const other = nodes.find((node) => node !== owner)!
  const via = { owner, other } as const

  const exec = async (node: string) => {
    const started = performance.now()
    const answer = await call(node, "POST", `/v1/sessions/${id}/exec`, { key, body: { command: ["true"] } })
    const ms = performance.now() - started
    if (answer.status !== 200 || json(answer.bytes).exit_code !== 0) throw new Error(`exec: ${answer.status}`)
    return ms
  }
  const runOnce = async (node: string) => {
    const started = performance.now()
    const answer = await call(node, "POST", "/v1/exec", { key, body: { command: ["true"] } })
    const ms = performance.now() - started
    if (answer.status !== 200 || json(answer.bytes).exit_code !== 0) throw new Error(`run: ${answer.status}`)
    return ms
  }

  log(`warm-up: ${warmup} execs and ${Math.ceil(warmup / 4)} runs through each node`)
  for (let i = 0; i < warmup; i++) for (const node of nodes) await exec(node)
  for (let i = 0; i < Math.ceil(warmup / 4); i++) for (const node of nodes) await runOnce(node)

  log(`exec round trip: ${execs} through each node, by turns`)
  const execMs = { owner: [] as Array<number>, other: [] as Array<number> }
  for (let i = 0; i < execs; i++)
    for (const path of i % 2 === 0 ? (["owner", "other"] as const) : (["other", "owner"] as const))
      execMs[path].push(await exec(via[path]))

  log(`run-once: ${runs} through each node, by turns (a sandbox each, placed where there is room)`)
  const runMs = { node1: [] as Array<number>, node2: [] as Array<number> }
  for (let i = 0; i < runs; i++) {
    runMs.node1.push(await runOnce(nodes[0]!))
    runMs.node2.push(await runOnce(nodes[1]!))
  }
  await call(nodes[0]!, "DELETE", `/v1/sessions/${id}`, { key })

  const row = (label: string, values: ReadonlyArray<number>) =>
    `${label.padEnd(40)} ${String(values.length).padStart(5)} ${percentile(values, 50).toFixed(2).padStart(9)} ${percentile(values, 95).toFixed(2).padStart(9)}`
  console.log(
    [
      "",
      `sandbox calls on two nodes (${new Date().toISOString()})`,
      `${"".padEnd(40)} ${"n".padStart(5)} ${"p50 ms".padStart(9)} ${"p95 ms".padStart(9)}`,
      row("exec [true], through its node", execMs.owner),
      row("exec [true], through the other node", execMs.other),
      row("POST /v1/exec [true], through node-1", runMs.node1),
      row("POST /v1/exec [true], through node-2", runMs.node2),
      `the other node's share of an exec: ${(percentile(execMs.other, 50) - percentile(execMs.owner, 50)).toFixed(2)} ms at the median`
    ].join("\n")
  )
  await Fs.writeFile(
    Path.join("bench", "sandbox", "last-run-cluster.json"),
    `${JSON.stringify({ at: new Date().toISOString(), execMs, runMs }, null, 2)}\n`
  )
} catch (error) {
  failed = true
  console.error(error)
} finally {
  await cluster.stop()
}
if (failed) process.exit(1)
