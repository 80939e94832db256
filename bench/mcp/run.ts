// The MCP endpoint's cost over REST: a `tools/call` round trip against the REST
// call it makes, in the same run, against one service in a child process. See
// bench/README.md.
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import * as Fs from "node:fs/promises"
import * as Http from "node:http"
import { stats } from "../session-lifecycle/Report.ts"
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
/** The target: a tool call within this ratio of its REST call. */
const TARGET_RATIO = 1.1
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

  // A raw JSON-RPC client: one POST a call, as the REST client makes one GET, so the two differ only
  // by what the service does. Both go through node:http on one kept-alive socket: `fetch` (undici)
  // costs about 0.05 ms more for a POST with a body than for a GET on its own side, a tenth of these
  // calls, which is the client's and no service's. The SDK's client is timed beside them for what an
  // agent sees.
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
      sdk: () => client.callTool({ name: "browser_screenshot", arguments: { session_id: id } })
    }
  ]

  const results = []
  for (const each of cases) {
    // A screenshot is slow: fewer of them.
    const calls = each.name.includes("screenshot") ? Math.min(CALLS, 60) : CALLS
    const warmup = each.name.includes("screenshot") ? 5 : WARMUP
    const samples = { rest: [] as Array<number>, tool: [] as Array<number>, sdk: [] as Array<number> }
    // By turns, so a drift in the machine's load falls on all three alike.
    for (let i = 0; i < warmup + calls; i++) {
      for (const side of ["rest", "tool", "sdk"] as const) {
        const t0 = performance.now()
        await each[side]()
        if (i >= warmup) samples[side].push(performance.now() - t0)
      }
    }
    const rest = stats(samples.rest)
    const tool = stats(samples.tool)
    const sdk = stats(samples.sdk)
    const ratio = tool.p50 / rest.p50
    const sdkRatio = sdk.p50 / rest.p50
    log(
      `${each.name}: REST p50 ${rest.p50.toFixed(2)} ms, tools/call p50 ${tool.p50.toFixed(2)} ms (${ratio.toFixed(2)}x), SDK client ${sdk.p50.toFixed(2)} ms (${sdkRatio.toFixed(2)}x)`
    )
    results.push({
      case: each.name,
      read: each.read,
      calls,
      rest,
      tool,
      sdk,
      ratio,
      sdkRatio,
      meets: ratio <= TARGET_RATIO
    })
  }
  // The reads are counted against the target: a screenshot's own time dwarfs both sides.
  const verdict = results.every((result) => !result.read || result.meets) ? "met" : "not met"
  log(`target (a tools/call within ${TARGET_RATIO}x of its REST call, p50): ${verdict}`)
  await transport.terminateSession().catch(() => undefined)
  await client.close()
  agent.destroy()
  await call(service.baseUrl, "DELETE", `/v1/sessions/${id}`, { key })
  // The job's session, if it still runs, ends with the service.
  const report = { at: new Date().toISOString(), calls: CALLS, target: TARGET_RATIO, verdict, results }
  await Fs.writeFile(resultFile, `${JSON.stringify(report, null, 2)}\n`)
} finally {
  await service.stop()
}
