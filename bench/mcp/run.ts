// The MCP endpoint's cost over REST: a `tools/call` round trip against the REST
// call it makes, in the same run, against one service in a child process. See
// bench/README.md.
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import * as Fs from "node:fs/promises"
import * as Http from "node:http"
import { type Stats, stats } from "../session-lifecycle/Report.ts"
import {
  call,
  createSession,
  intFromEnv,
  json,
  signUp,
  startChildProcess,
  waitForReady
} from "../session-lifecycle/TargetService.ts"

const CALLS = intFromEnv("BENCH_CALLS", 1000)
/** Uncounted first calls: the JIT settles (the REST p50 halves over the first few hundred). */
const WARMUP = intFromEnv("BENCH_WARMUP", 300, 0)
/** Calls of each side in a row, after the timed turns, over which the service's CPU is read (0: none). */
const CPU_CALLS = intFromEnv("BENCH_CPU_CALLS", 2000, 0)
/** The target: a tool call within this ratio of its REST call, each pair through one HTTP client. */
const TARGET_RATIO = 1.1
/** The sides of a case: each pair is one HTTP client, REST against the tool call. */
const SIDES = ["rest", "tool", "restFetch", "toolFetch", "sdk"] as const
type Side = (typeof SIDES)[number]

interface CaseResult {
  readonly case: string
  readonly read: boolean
  readonly calls: number
  readonly timing: Record<Side, Stats>
  /** Per call, in µs: the service's CPU, and this process's (the client's). */
  readonly cpuMicros?: { readonly calls: number } & Partial<
    Record<Side, { readonly service: number; readonly client: number }>
  >
  readonly ratio: number
  readonly fetchRatio: number
  readonly sdkRatio: number
  readonly meets: boolean
  readonly sdkMeets: boolean
}
const resultFile = new URL("./last-run.json", import.meta.url)
const log = (message: string) => process.stderr.write(`[bench] ${message}\n`)

const service = await startChildProcess(
  { BROWSER_POOL_SIZE: "1", LIMIT_MCP_REQUESTS_PER_MINUTE: "100000", LIMIT_SCREENSHOTS_PER_MINUTE: "100000" },
  undefined
)
process.on("SIGINT", () => void service.stop().then(() => process.exit(130)))

try {
  const key = await signUp(service.baseUrl)
  const created = await createSession(service.baseUrl, key, "browser")
  const id: string = json(created.bytes).id
  await waitForReady(service.baseUrl, key, id)
  const mcpUrl = `${service.baseUrl}/v1/mcp`

  // Two pairs, each one HTTP client both ways, so REST and the tool call differ only by what the
  // service does. A raw JSON-RPC client through node:http on one kept-alive socket, beside a GET
  // through the same. And the official SDK client, which speaks through `fetch` (undici), beside
  // the route fetched with `fetch`, as a user's REST client would: undici costs more for a POST
  // with a body than for a GET on its own side, which is the client's and no service's. A raw
  // JSON-RPC POST through `fetch` sits between them: the SDK client's own share is what it adds.
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), {
    requestInit: { headers: { authorization: `Bearer ${key}` } }
  })
  const client = new Client({ name: "bench", version: "1.0.0" })
  await client.connect(transport)
  const sessionId = transport.sessionId!
  const agent = new Http.Agent({ keepAlive: true, maxSockets: 1 })
  const target = new URL(service.baseUrl)
  const wire = (method: string, path: string, headers: Record<string, string>, body?: string) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      const request = Http.request(
        {
          host: target.hostname,
          port: target.port,
          path,
          method,
          agent,
          headers: {
            authorization: `Bearer ${key}`,
            ...headers,
            ...(body === undefined ? {} : { "content-length": String(Buffer.byteLength(body)) })
          }
        },
        (response) => {
          const parts: Array<Buffer> = []
          response.on("data", (part: Buffer) => parts.push(part))
          response.on("end", () =>
            resolve({ status: response.statusCode ?? 0, text: Buffer.concat(parts).toString("utf8") })
          )
          response.on("error", reject)
        }
      )
      request.on("error", reject)
      request.end(body)
    })
  let nextId = 1
  const rawToolCall = async (name: string, args: object) => {
    const response = await wire(
      "POST",
      "/v1/mcp",
      {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-session-id": sessionId,
        "mcp-protocol-version": "2025-11-25"
      },
      JSON.stringify({
        jsonrpc: "2.0",
        id: nextId++,
        method: "tools/call",
        params: { name, arguments: args }
      })
    )
    const answer = JSON.parse(response.text)
    if (answer.result?.isError !== false && answer.result?.isError !== undefined)
      throw new Error(`${name}: ${response.text}`)
    if (answer.error !== undefined) throw new Error(`${name}: ${JSON.stringify(answer.error)}`)
    return answer.result
  }
  /** The REST side: the same client, one request a call; a JSON answer is parsed, as the tool's is. */
  const restCall = async (method: string, path: string, isJson = true) => {
    const response = await wire(method, path, {})
    if (response.status !== 200) throw new Error(`${method} ${path}: ${response.status}`)
    if (isJson) JSON.parse(response.text)
  }
  /** The REST side through `fetch`, the SDK client's HTTP stack. */
  const restFetch = async (method: string, path: string, isJson = true) => {
    const response = await fetch(`${service.baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}` }
    })
    if (response.status !== 200) throw new Error(`${method} ${path}: ${response.status}`)
    if (isJson) await response.json()
    else await response.arrayBuffer()
  }
  /** A raw JSON-RPC POST through `fetch`, with the SDK client's headers. */
  const fetchToolCall = async (name: string, args: object) => {
    const response = await fetch(mcpUrl, {
      method: "POST",
      headers: {
        authorization: `Bearer ${key}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-session-id": sessionId,
        "mcp-protocol-version": "2025-11-25"
      },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: nextId++,
        method: "tools/call",
        params: { name, arguments: args }
      })
    })
    const answer: any = await response.json()
    if (answer.error !== undefined || answer.result?.isError === true)
      throw new Error(`${name}: ${JSON.stringify(answer)}`)
    return answer.result
  }
  /** The service's CPU time so far, in ms (`/proc/<pid>/stat`: user and system ticks of 10 ms). */
  const serviceCpu = async () => {
    if (service.pid === undefined) return Number.NaN
    const stat = await Fs.readFile(`/proc/${service.pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return (Number(fields[11]) + Number(fields[12])) * 10
  }
  /** This process's CPU time so far, in ms. */
  const clientCpu = () => {
    const usage = process.cpuUsage()
    return (usage.user + usage.system) / 1000
  }

  // A job to read: what it does does not matter, only that `jobs_get` and its route find it.
  const job = await call(service.baseUrl, "POST", "/v1/jobs", {
    key,
    body: { kind: "screenshot", input: { url: `${service.baseUrl}/healthz` } }
  })
  if (job.status >= 300) throw new Error(`job: ${job.status} ${new TextDecoder().decode(job.bytes)}`)
  const jobId: string = json(job.bytes).id

  /** A read route against its tool, raw and through the SDK client. */
  const read = (path: string, tool: string, args: Record<string, unknown>) => ({
    name: `GET ${path.replace(id, "{id}").replace(jobId, "{id}")} vs ${tool}`,
    read: true,
    rest: () => restCall("GET", path),
    tool: () => rawToolCall(tool, args),
    restFetch: () => restFetch("GET", path),
    toolFetch: () => fetchToolCall(tool, args),
    sdk: () => client.callTool({ name: tool, arguments: args })
  })

  const cases = [
    read(`/v1/sessions/${id}`, "sessions_get", { session_id: id }),
    read("/v1/sessions?limit=20", "sessions_list", { limit: 20 }),
    read(`/v1/jobs/${jobId}`, "jobs_get", { job_id: jobId }),
    read("/v1/workspaces", "workspaces_list", {}),
    {
      name: "POST /v1/sessions/{id}/screenshot vs browser_screenshot",
      read: false,
      rest: () => restCall("POST", `/v1/sessions/${id}/screenshot`, false),
      tool: () => rawToolCall("browser_screenshot", { session_id: id }),
      restFetch: () => restFetch("POST", `/v1/sessions/${id}/screenshot`, false),
      toolFetch: () => fetchToolCall("browser_screenshot", { session_id: id }),
      sdk: () => client.callTool({ name: "browser_screenshot", arguments: { session_id: id } })
    }
  ]

  if (CPU_CALLS > 0)
    log(`CPU: µs a call, the service's/this client's, over ${CPU_CALLS} calls of one side in a row`)
  const results: Array<CaseResult> = []
  for (const each of cases) {
    // A screenshot is slow: fewer of them.
    const screenshot = each.name.includes("screenshot")
    const calls = screenshot ? Math.min(CALLS, 60) : CALLS
    const warmup = screenshot ? 5 : WARMUP
    const samples = Object.fromEntries(SIDES.map((side) => [side, [] as Array<number>])) as Record<
      Side,
      Array<number>
    >
    // By turns, so a drift in the machine's load falls on all sides alike.
    for (let i = 0; i < warmup + calls; i++) {
      for (const side of SIDES) {
        const t0 = performance.now()
        await each[side]()
        if (i >= warmup) samples[side].push(performance.now() - t0)
      }
    }
    // CPU per call, each side's calls in a row: the service's (what it does for each), and this
    // process's (what each client does with the answer).
    const cpu: Partial<Record<Side, { service: number; client: number }>> = {}
    const cpuCalls = screenshot ? 0 : CPU_CALLS
    if (cpuCalls > 0)
      for (const side of SIDES) {
        const [service0, client0] = [await serviceCpu(), clientCpu()]
        for (let i = 0; i < cpuCalls; i++) await each[side]()
        const [service1, client1] = [await serviceCpu(), clientCpu()]
        cpu[side] = {
          service: ((service1 - service0) / cpuCalls) * 1000,
          client: ((client1 - client0) / cpuCalls) * 1000
        }
      }
    const timing = Object.fromEntries(SIDES.map((side) => [side, stats(samples[side])])) as Record<
      Side,
      Stats
    >
    const ratio = timing.tool.p50 / timing.rest.p50
    const fetchRatio = timing.toolFetch.p50 / timing.restFetch.p50
    const sdkRatio = timing.sdk.p50 / timing.restFetch.p50
    const us = (side: Side) => {
      const used = cpu[side]
      return used === undefined ? "" : `, CPU ${used.service.toFixed(0)}/${used.client.toFixed(0)} µs`
    }
    log(
      `${each.name}: node:http REST p50 ${timing.rest.p50.toFixed(2)} ms${us("rest")}, tools/call ${timing.tool.p50.toFixed(2)} ms${us("tool")} (${ratio.toFixed(2)}x); ` +
        `fetch REST ${timing.restFetch.p50.toFixed(2)} ms${us("restFetch")}, tools/call ${timing.toolFetch.p50.toFixed(2)} ms${us("toolFetch")} (${fetchRatio.toFixed(2)}x), ` +
        `SDK client ${timing.sdk.p50.toFixed(2)} ms${us("sdk")} (${sdkRatio.toFixed(2)}x)`
    )
    results.push({
      case: each.name,
      read: each.read,
      calls,
      timing,
      ...(cpuCalls > 0 ? { cpuMicros: { calls: cpuCalls, ...cpu } } : {}),
      ratio,
      fetchRatio,
      sdkRatio,
      meets: ratio <= TARGET_RATIO,
      sdkMeets: sdkRatio <= TARGET_RATIO
    })
  }
  // The reads are counted against the target: a screenshot's own time dwarfs both sides.
  const verdictOf = (meets: (result: (typeof results)[number]) => boolean) =>
    results.every((result) => !result.read || meets(result)) ? "met" : "not met"
  const verdict = verdictOf((result) => result.meets)
  const sdkVerdict = verdictOf((result) => result.sdkMeets)
  log(`target (a raw tools/call within ${TARGET_RATIO}x of its REST call, node:http both, p50): ${verdict}`)
  log(
    `target (the SDK client's tools/call within ${TARGET_RATIO}x of its REST call with fetch, p50): ${sdkVerdict}`
  )
  await transport.terminateSession().catch(() => undefined)
  await client.close()
  agent.destroy()
  await call(service.baseUrl, "DELETE", `/v1/sessions/${id}`, { key })
  // The job's session, if it still runs, ends with the service.
  const report = {
    at: new Date().toISOString(),
    calls: CALLS,
    target: TARGET_RATIO,
    verdict,
    sdkVerdict,
    results
  }
  await Fs.writeFile(resultFile, `${JSON.stringify(report, null, 2)}\n`)
} finally {
  await service.stop()
}
