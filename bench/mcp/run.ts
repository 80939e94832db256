// The MCP endpoint's cost over REST: a `tools/call` round trip against the REST
// call it makes, in the same run, against one service in a child process, each
// pair through one HTTP client; and the same clients against a stand-in that
// replays the service's answers, for what a client costs with no service behind
// it. See bench/README.md.
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import * as Fs from "node:fs/promises"
import * as Http from "node:http"
import { type Stats, stats } from "../session-lifecycle/Report.ts"
import * as Replay from "./Replay.ts"
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
/** The sides against the service: each pair is one HTTP client, REST against the tool call. */
const SIDES = ["rest", "tool", "restFetch", "toolFetch", "sdk"] as const
type Side = (typeof SIDES)[number]
/** The sides against the stand-in (`Replay`): a fetch GET, and the SDK client on each answer shape. */
const REPLAYED = ["rest", ...Replay.SHAPES] as const
type Replayed = (typeof REPLAYED)[number]
/** Turns in a row against one server before the other's. */
const BLOCK = 100

interface CpuUse {
  readonly server: number
  readonly client: number
}

interface CaseResult {
  readonly case: string
  readonly read: boolean
  readonly calls: number
  readonly timing: Record<Side, Stats>
  /** Per call, in µs: the server's CPU (the service's, the stand-in's), and this process's (the client's). */
  readonly cpuMicros?: { readonly calls: number } & Partial<Record<Side, CpuUse>> & {
      readonly replayed: Partial<Record<Replayed, CpuUse>>
    }
  readonly ratio: number
  readonly fetchRatio: number
  readonly sdkRatio: number
  readonly meets: boolean
  readonly sdkMeets: boolean
  /** The same clients against the stand-in, by turns with the service's sides. */
  readonly replayed?: {
    readonly timing: Record<Replayed, Stats>
    readonly sdkRatio: number
    /** What the SDK client pays over a fetch GET (p50, ms): with the service, with the stand-in. */
    readonly gapWithService: number
    readonly gapReplayed: number
  }
}
const resultFile = new URL("./last-run.json", import.meta.url)
const log = (message: string) => process.stderr.write(`[bench] ${message}\n`)

const service = await startChildProcess(
  {
    BROWSER_POOL_SIZE: "1",
    LIMIT_MCP_REQUESTS_PER_MINUTE: "1000000",
    LIMIT_SCREENSHOTS_PER_MINUTE: "100000"
  },
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
  // As an agent does before it calls: the client keeps each listed tool's output schema to check
  // every answer's structured content against (the tools here declare none).
  await client.listTools()
  const sessionId = transport.sessionId!
  const agent = new Http.Agent({ keepAlive: true, maxSockets: 1 })
  const target = new URL(service.baseUrl)
  const wire = (method: string, path: string, headers: Record<string, string>, body?: string) =>
    new Promise<{ status: number; headers: Http.IncomingHttpHeaders; text: string }>((resolve, reject) => {
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
            resolve({
              status: response.statusCode ?? 0,
              headers: response.headers,
              text: Buffer.concat(parts).toString("utf8")
            })
          )
          response.on("error", reject)
        }
      )
      request.on("error", reject)
      request.end(body)
    })
  let nextId = 1
  /** One JSON-RPC request through node:http, with the SDK client's headers (in `session`, if given). */
  const rawRequest = (method: string, params: object, session: string | null = sessionId) =>
    wire(
      "POST",
      "/v1/mcp",
      {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        ...(session === null ? {} : { "mcp-session-id": session, "mcp-protocol-version": "2025-11-25" })
      },
      JSON.stringify({ jsonrpc: "2.0", id: nextId++, method, params })
    )
  const rawToolCall = async (name: string, args: object) => {
    const response = await rawRequest("tools/call", { name, arguments: args })
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
  /** A process's CPU time so far, in ms (`/proc/<pid>/stat`: user and system ticks of 10 ms). */
  const processCpu = async (pid: number | undefined) => {
    if (pid === undefined) return Number.NaN
    const stat = await Fs.readFile(`/proc/${pid}/stat`, "utf8")
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

  const reads = [
    { path: `/v1/sessions/${id}`, tool: "sessions_get", args: { session_id: id } },
    { path: "/v1/sessions?limit=20", tool: "sessions_list", args: { limit: 20 } },
    { path: `/v1/jobs/${jobId}`, tool: "jobs_get", args: { job_id: jobId } },
    { path: "/v1/workspaces", tool: "workspaces_list", args: {} }
  ]

  // The floor: a stand-in in its own process that replays the service's own answers (bytes and
  // headers) and does nothing else. What the SDK client pays over a fetch GET there is the client's,
  // which no service can take away; and each shape the answer could take is timed beside it.
  const captured = (answer: Awaited<ReturnType<typeof wire>>): Replay.Captured => {
    if (answer.status !== 200) throw new Error(`to replay: HTTP ${answer.status}: ${answer.text}`)
    return {
      status: answer.status,
      headers: Object.fromEntries(
        Object.entries(answer.headers).flatMap(([name, value]) =>
          Replay.OWN_HEADERS.has(name) || value === undefined ? [] : [[name, String(value)]]
        )
      ),
      body: answer.text
    }
  }
  const opened = await rawRequest(
    "initialize",
    { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "bench", version: "1.0.0" } },
    null
  )
  await wire("DELETE", "/v1/mcp", { "mcp-session-id": String(opened.headers["mcp-session-id"]) })
  const restAnswers: Record<string, Replay.Captured> = {}
  const toolAnswers: Record<string, Replay.Captured> = {}
  for (const each of reads) {
    restAnswers[each.path] = captured(await wire("GET", each.path, {}))
    toolAnswers[each.tool] = captured(
      await rawRequest("tools/call", { name: each.tool, arguments: each.args })
    )
  }
  const replay = await Replay.start({
    rest: restAnswers,
    tools: toolAnswers,
    initialize: captured(opened),
    toolsList: captured(await rawRequest("tools/list", {}))
  })
  const replayClients = new Map<Replay.Shape, Client>()
  for (const shape of Replay.SHAPES) {
    const replayClient = new Client({ name: "bench", version: "1.0.0" })
    await replayClient.connect(new StreamableHTTPClientTransport(new URL(`${replay.urls[shape]}/v1/mcp`)))
    await replayClient.listTools()
    replayClients.set(shape, replayClient)
  }

  /** A read route against its tool: raw, through fetch and the SDK client, then replayed. */
  const read = ({ path, tool, args }: (typeof reads)[number]) => ({
    name: `GET ${path.replace(id, "{id}").replace(jobId, "{id}")} vs ${tool}`,
    read: true,
    sides: {
      rest: () => restCall("GET", path),
      tool: () => rawToolCall(tool, args),
      restFetch: () => restFetch("GET", path),
      toolFetch: () => fetchToolCall(tool, args),
      sdk: () => client.callTool({ name: tool, arguments: args })
    } satisfies Record<Side, () => Promise<unknown>>,
    replayed: {
      rest: async () => (await fetch(`${replay.urls.exact}${path}`)).json(),
      ...(Object.fromEntries(
        Replay.SHAPES.map((shape) => [
          shape,
          () => replayClients.get(shape)!.callTool({ name: tool, arguments: args })
        ])
      ) as Record<Replay.Shape, () => Promise<unknown>>)
    } as Record<Replayed, () => Promise<unknown>> | undefined
  })

  const cases = [
    ...reads.map(read),
    {
      name: "POST /v1/sessions/{id}/screenshot vs browser_screenshot",
      read: false,
      sides: {
        rest: () => restCall("POST", `/v1/sessions/${id}/screenshot`, false),
        tool: () => rawToolCall("browser_screenshot", { session_id: id }),
        restFetch: () => restFetch("POST", `/v1/sessions/${id}/screenshot`, false),
        toolFetch: () => fetchToolCall("browser_screenshot", { session_id: id }),
        sdk: () => client.callTool({ name: "browser_screenshot", arguments: { session_id: id } })
      },
      replayed: undefined
    }
  ]

  if (CPU_CALLS > 0)
    log(`CPU: µs a call, the server's/this client's, over ${CPU_CALLS} calls of one side in a row`)
  const results: Array<CaseResult> = []
  for (const each of cases) {
    // A screenshot is slow: fewer of them.
    const calls = each.read ? CALLS : Math.min(CALLS, 60)
    const warmup = each.read ? WARMUP : 5
    type Turn = ReadonlyArray<readonly [string, () => Promise<unknown>]>
    const onService: Turn = Object.entries(each.sides)
    const onReplay: Turn = Object.entries(each.replayed ?? {}).map(
      ([side, run]) => [`replayed.${side}`, run] as const
    )
    const samples = new Map([...onService, ...onReplay].map(([side]) => [side, [] as Array<number>]))
    /**
     * `count` turns of `sides`: each side called twice in a row, the second timed (unless `counted`
     * is false). A call leaves work behind that delays the next one by up to 0.15 ms, more than a
     * millisecond later (the SDK client's most, and an event stream read to its end after its answer
     * resolved the call), so a side timed after another would be charged that one's: after itself,
     * it pays its own, as a client calling one way in a row does.
     */
    const turns = async (sides: Turn, count: number, counted: boolean) => {
      for (let i = 0; i < count; i++)
        for (const [side, run] of sides) {
          await run()
          const t0 = performance.now()
          await run()
          if (counted) samples.get(side)!.push(performance.now() - t0)
        }
    }
    // By turns, so a drift in the machine's load falls on all sides alike; the service's sides and
    // the stand-in's in blocks that alternate, since a process woken after a rest answers slower.
    await turns(onService, warmup, false)
    await turns(onReplay, warmup, false)
    for (let done = 0; done < calls; done += BLOCK) {
      await turns(onService, Math.min(BLOCK, calls - done), true)
      await turns(onReplay, Math.min(BLOCK, calls - done), true)
    }
    const timingOf = (side: string) => stats(samples.get(side)!)
    // CPU per call, each side's calls in a row: the service's (what it does for each), and this
    // process's (what each client does with the answer).
    const cpuCalls = each.read ? CPU_CALLS : 0
    /** CPU a call of `run`, in µs, over `cpuCalls` in a row: the server's (`pid`) and this process's. */
    const cpuOf = async (pid: number | undefined, run: () => Promise<unknown>): Promise<CpuUse> => {
      const [server0, client0] = [await processCpu(pid), clientCpu()]
      for (let i = 0; i < cpuCalls; i++) await run()
      const [server1, client1] = [await processCpu(pid), clientCpu()]
      return {
        server: ((server1 - server0) / cpuCalls) * 1000,
        client: ((client1 - client0) / cpuCalls) * 1000
      }
    }
    const cpu: Partial<Record<Side, CpuUse>> = {}
    const replayedCpu: Partial<Record<Replayed, CpuUse>> = {}
    if (cpuCalls > 0) {
      for (const side of SIDES) cpu[side] = await cpuOf(service.pid, each.sides[side])
      for (const side of REPLAYED)
        if (each.replayed !== undefined) replayedCpu[side] = await cpuOf(replay.pid, each.replayed[side])
    }
    const timing = Object.fromEntries(SIDES.map((side) => [side, timingOf(side)])) as Record<Side, Stats>
    const ratio = timing.tool.p50 / timing.rest.p50
    const fetchRatio = timing.toolFetch.p50 / timing.restFetch.p50
    const sdkRatio = timing.sdk.p50 / timing.restFetch.p50
    const cpuText = (used: CpuUse | undefined) =>
      used === undefined ? "" : `, CPU ${used.server.toFixed(0)}/${used.client.toFixed(0)} µs`
    const us = (side: Side) => cpuText(cpu[side])
    const usReplayed = (side: Replayed) => cpuText(replayedCpu[side])
    log(
      `${each.name}: node:http REST p50 ${timing.rest.p50.toFixed(2)} ms${us("rest")}, tools/call ${timing.tool.p50.toFixed(2)} ms${us("tool")} (${ratio.toFixed(2)}x); ` +
        `fetch REST ${timing.restFetch.p50.toFixed(2)} ms${us("restFetch")}, tools/call ${timing.toolFetch.p50.toFixed(2)} ms${us("toolFetch")} (${fetchRatio.toFixed(2)}x), ` +
        `SDK client ${timing.sdk.p50.toFixed(2)} ms${us("sdk")} (${sdkRatio.toFixed(2)}x)`
    )
    let replayed: CaseResult["replayed"]
    if (each.replayed !== undefined) {
      const onReplay = Object.fromEntries(
        REPLAYED.map((side) => [side, timingOf(`replayed.${side}`)])
      ) as Record<Replayed, Stats>
      replayed = {
        timing: onReplay,
        sdkRatio: onReplay.exact.p50 / onReplay.rest.p50,
        gapWithService: timing.sdk.p50 - timing.restFetch.p50,
        gapReplayed: onReplay.exact.p50 - onReplay.rest.p50
      }
      const shapes = Replay.SHAPES.filter((shape) => shape !== "exact")
        .map((shape) => {
          const delta = onReplay[shape].p50 - onReplay.exact.p50
          return `${shape} ${delta >= 0 ? "+" : ""}${delta.toFixed(3)}`
        })
        .join(", ")
      log(
        `  replayed: fetch REST ${onReplay.rest.p50.toFixed(2)} ms${usReplayed("rest")}, SDK client ${onReplay.exact.p50.toFixed(2)} ms${usReplayed("exact")} (${replayed.sdkRatio.toFixed(2)}x); ` +
          `the SDK client over fetch REST: ${replayed.gapWithService.toFixed(3)} ms with the service, ${replayed.gapReplayed.toFixed(3)} ms replayed; ` +
          `the SDK client on other shapes (ms): ${shapes}`
      )
    }
    results.push({
      case: each.name,
      read: each.read,
      calls,
      timing,
      ...(cpuCalls > 0 ? { cpuMicros: { calls: cpuCalls, ...cpu, replayed: replayedCpu } } : {}),
      ratio,
      fetchRatio,
      sdkRatio,
      meets: ratio <= TARGET_RATIO,
      sdkMeets: sdkRatio <= TARGET_RATIO,
      ...(replayed === undefined ? {} : { replayed })
    })
  }
  for (const replayClient of replayClients.values()) await replayClient.close()
  await replay.stop()

  // The reads are counted against the target: a screenshot's own time dwarfs both sides.
  const verdictOf = (meets: (result: CaseResult) => boolean) =>
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
