// A stand-in for the service that does nothing but answer, in its own process: the bench gives it
// the service's own answers (bytes and headers) to a read route and to its tool call, and times the
// same clients against it, so what a client costs with no service behind it is measured beside
// what it costs with one. Each answer shape the service could give a tool call is served on its own
// port, so the shapes are timed by turns in one run, each client with its own connections (a stream's
// end read after its answer would otherwise delay the next shape's call). See bench/README.md.
import { fork } from "node:child_process"
import * as Http from "node:http"

/** An answer as the service wrote it. */
export interface Captured {
  readonly status: number
  /** Its headers, less what node:http writes itself (`date`, `connection`, `content-length`...). */
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

export interface ReplayAnswers {
  /** A read route's answer, by its path. */
  readonly rest: Readonly<Record<string, Captured>>
  /** A tool call's answer, by the tool's name. */
  readonly tools: Readonly<Record<string, Captured>>
  /** The answers to `initialize` and `tools/list`. */
  readonly initialize: Captured
  readonly toolsList: Captured
}

/**
 * The shapes of a tool call's answer: as the service gives it; without the headers a client need
 * not read (the rate limit's, the revision's); the record only as text; the record only as
 * `structuredContent`; as one event of a stream (what an SDK server writes), last, since its end is
 * read after the call has resolved.
 */
export const SHAPES = ["exact", "bare", "textOnly", "structuredOnly", "sse"] as const
export type Shape = (typeof SHAPES)[number]

/** Headers node:http writes of its own; a captured answer leaves them to it. */
export const OWN_HEADERS = new Set([
  "date",
  "connection",
  "keep-alive",
  "content-length",
  "transfer-encoding"
])

const REPLAY_SESSION = "replay"

/** A JSON-RPC answer's `result`, in each shape, as JSON text (the id goes in at each call). */
const resultsOf = (captured: Captured): Record<Shape, string> => {
  const result = JSON.parse(captured.body).result
  const text = result.content?.find((part: { type: string }) => part.type === "text")
  return {
    exact: JSON.stringify(result),
    sse: JSON.stringify(result),
    bare: JSON.stringify(result),
    textOnly: JSON.stringify({ ...result, structuredContent: undefined }),
    structuredOnly: JSON.stringify({
      ...result,
      content: result.content.filter((part: unknown) => part !== text)
    })
  }
}

const RATE_LIMIT = /^x-ratelimit-/

const serve = (answers: ReplayAnswers, shape: Shape) => {
  const tools = new Map(
    Object.entries(answers.tools).map(([name, captured]) => [
      name,
      { captured, results: resultsOf(captured) }
    ])
  )
  const fixed = {
    initialize: JSON.stringify(JSON.parse(answers.initialize.body).result),
    "tools/list": JSON.stringify(JSON.parse(answers.toolsList.body).result)
  }
  return Http.createServer((request, response) => {
    const parts: Array<Buffer> = []
    request.on("data", (part: Buffer) => parts.push(part))
    request.on("end", () => {
      const url = request.url ?? "/"
      const rest = answers.rest[url]
      if (request.method === "GET" && rest !== undefined) {
        response.writeHead(rest.status, { ...rest.headers, "content-length": Buffer.byteLength(rest.body) })
        return response.end(rest.body)
      }
      if (request.method !== "POST" || url !== "/v1/mcp") {
        response.writeHead(405, { "content-length": "0" })
        return response.end()
      }
      const message = JSON.parse(Buffer.concat(parts).toString("utf8"))
      if (message.id === undefined) {
        response.writeHead(202, { "content-length": "0" })
        return response.end()
      }
      const tool = message.method === "tools/call" ? tools.get(message.params?.name) : undefined
      const captured =
        tool?.captured ?? (message.method === "initialize" ? answers.initialize : answers.toolsList)
      const result =
        tool?.results[shape] ?? (message.method === "initialize" ? fixed.initialize : fixed["tools/list"])
      const line = `{"jsonrpc":"2.0","id":${JSON.stringify(message.id)},"result":${result}}`
      const headers: Record<string, string> = { ...captured.headers }
      if (message.method === "initialize") headers["mcp-session-id"] = REPLAY_SESSION
      if (shape === "bare")
        for (const name of Object.keys(headers))
          if (RATE_LIMIT.test(name) || name === "mcp-protocol-version") delete headers[name]
      if (shape === "sse") {
        // As an SDK server streams it: one event, the stream's length untold.
        response.writeHead(200, {
          ...headers,
          "content-type": "text/event-stream",
          "cache-control": "no-cache"
        })
        return response.end(`event: message\ndata: ${line}\n\n`)
      }
      const body = `${line}\n`
      response.writeHead(200, { ...headers, "content-length": Buffer.byteLength(body) })
      response.end(body)
    })
  })
}

/** Starts the stand-in in a child process with `answers`: each shape's base URL, and how to stop it. */
export const start = async (answers: ReplayAnswers) => {
  const child = fork(new URL(import.meta.url).pathname, ["--serve"], {
    execArgv: ["--experimental-strip-types"],
    stdio: ["ignore", "ignore", "inherit", "ipc"]
  })
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  const ports = await new Promise<Record<Shape, number>>((resolve, reject) => {
    child.once("message", (message) => resolve(message as Record<Shape, number>))
    child.once("exit", () => reject(new Error("the replay server exited")))
    child.send(answers)
  })
  return {
    pid: child.pid,
    urls: Object.fromEntries(SHAPES.map((shape) => [shape, `http://127.0.0.1:${ports[shape]}`])) as Record<
      Shape,
      string
    >,
    stop: async () => {
      child.kill()
      await exited
    }
  }
}

if (process.argv.includes("--serve")) {
  // The bench gone, so is its stand-in.
  process.once("disconnect", () => process.exit(0))
  process.once("message", async (answers) => {
    const ports: Partial<Record<Shape, number>> = {}
    for (const shape of SHAPES) {
      const server = serve(answers as ReplayAnswers, shape)
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
      const address = server.address()
      ports[shape] = typeof address === "object" && address !== null ? address.port : 0
    }
    process.send?.(ports)
  })
}
