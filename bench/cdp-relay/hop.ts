// CDP to a session through the node that runs it and through another node
// (the node hop), beside CDP straight to the session's Chromium, in the same
// run, on a two-node `npm run cluster`. See bench/README.md.
import * as Path from "node:path"
import { type Client, mean, measureWarm, median, open } from "./Measure.ts"
import { sessionBrowserEndpoint } from "../session-lifecycle/SessionBrowser.ts"
import { startCluster } from "../session-lifecycle/LocalCluster.ts"
import { call, json, signUp, sleep } from "../session-lifecycle/TargetService.ts"

const PATHS = ["owner", "hop", "same"] as const
type PathName = (typeof PATHS)[number]
const log = (message: string) => process.stderr.write(`[bench] ${message}\n`)

const cluster = await startCluster(2, { BROWSER_POOL_SIZE: "1" })
const { dataDir, nodes } = cluster
try {
  const key = await signUp(nodes[0]!)
  const created = await call(nodes[0]!, "POST", "/v1/sessions", { key, body: {} })
  const session: { id: string } = json(created.bytes)
  while (json((await call(nodes[0]!, "GET", `/v1/sessions/${session.id}`, { key })).bytes).status !== "ready")
    await sleep(10)
  const auth = { authorization: `Bearer ${key}` }
  const cdp = (node: string) => `${node.replace("http://", "ws://")}/sessions/${session.id}`
  const probe = await open(cdp(nodes[0]!), auth)
  // The owner is the node whose profiles hold the session's browser.
  let owner = -1
  let endpoint = ""
  for (const [index] of nodes.entries()) {
    const found = await sessionBrowserEndpoint(Path.join(dataDir, `node-${index + 1}`), probe.targetId).catch(
      () => undefined
    )
    if (found !== undefined) {
      owner = index
      endpoint = found
      break
    }
  }
  probe.close()
  if (owner < 0) throw new Error("the session's browser was not found")
  const clients: Record<PathName, Client> = {
    owner: await open(cdp(nodes[owner]!), auth),
    hop: await open(cdp(nodes[1 - owner]!), auth),
    same: await open(endpoint, {})
  }
  const rounds = Number(process.env.BENCH_ROUNDS ?? 5)
  const { single, flights, larges } = await measureWarm(PATHS, clients, rounds)
  const row = (
    label: string,
    figures: Record<PathName, Array<number>>,
    pick: (v: Array<number>) => number
  ) => {
    const [viaOwner, viaHop, same] = PATHS.map((path) => pick(figures[path])) as [number, number, number]
    const cell = (value: number) => value.toFixed(2).padStart(9)
    const ratio = (value: number) => `${value.toFixed(2)}x`.padStart(11)
    return `${label.padEnd(32)} ${cell(viaOwner)} ${cell(viaHop)} ${cell(same)} ms ${cell(viaHop - viaOwner)} ms ${ratio(viaHop / viaOwner)}`
  }
  const head = (...names: Array<string>) => names.map((name) => name.padStart(9)).join(" ")
  console.log(
    [
      "",
      "CDP through the session's node, through the other node (the hop), and straight to its Chromium",
      `${"".padEnd(32)} ${head("owner", "hop", "same")}    ${head("hop added")}    ${"hop/owner".padStart(11)}`,
      row("one at a time, p50", single, median),
      row("one at a time, mean", single, mean),
      row("in flight, mean round trip", flights, median),
      row("large answer", larges, median),
      `(in flight and large: median of ${rounds} rounds)`,
      ""
    ].join("\n")
  )
  await call(nodes[0]!, "DELETE", `/v1/sessions/${session.id}`, { key })
  log(`session ${session.id} ran on node-${owner + 1}`)
} finally {
  await cluster.stop()
}
