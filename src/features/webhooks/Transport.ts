import * as Http from "node:http"
import * as Https from "node:https"
import type { Target } from "./Targets.ts"

/** An attempt's outcome: the endpoint's status (or why there was none) and the start of its answer. */
export interface AttemptOutcome {
  readonly statusCode: number | null
  readonly error: string | null
  /** The first 1 KB of the answer's body. */
  readonly excerpt: string | null
}

/** How long an endpoint has to answer (the whole answer). */
export const ATTEMPT_TIMEOUT_MS = 15_000
const EXCERPT_BYTES = 1024
/** Past this much answer the connection is cut: only the excerpt is kept anyway. */
const MAX_READ_BYTES = 64 * 1024

/**
 * POSTs `body` to the target, connecting to the address it was checked at
 * (`lookup` pinned: no second DNS answer can point it elsewhere). TLS still
 * verifies the certificate against the URL's host name. `agent` keeps the
 * connections to that address alive between attempts. Never throws.
 */
export const post = (
  target: Target,
  headers: Readonly<Record<string, string>>,
  body: string,
  agent: Http.Agent | false = false,
  timeoutMs: number = ATTEMPT_TIMEOUT_MS
) =>
  new Promise<AttemptOutcome>((resolve) => {
    const https = target.url.protocol === "https:"
    let settled = false
    const finish = (outcome: AttemptOutcome) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      resolve(outcome)
    }
    const request = (https ? Https : Http).request(
      target.url,
      {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "user-agent": "remote-browser-service-webhooks/1",
          "content-length": String(Buffer.byteLength(body)),
          ...headers
        },
        lookup: (_hostname, options, callback) => {
          if ((options as { all?: boolean }).all === true)
            (callback as (error: null, addresses: Array<{ address: string; family: number }>) => void)(null, [
              { address: target.address, family: target.family }
            ])
          else callback(null, target.address, target.family)
        },
        agent
      },
      (response) => {
        const chunks: Array<Buffer> = []
        let read = 0
        response.on("data", (chunk: Buffer) => {
          if (read < EXCERPT_BYTES) chunks.push(chunk)
          read += chunk.length
          if (read > MAX_READ_BYTES) response.destroy()
        })
        const done = () =>
          finish({
            statusCode: response.statusCode ?? null,
            error: null,
            excerpt: Buffer.concat(chunks).subarray(0, EXCERPT_BYTES).toString("utf8")
          })
        response.on("end", done)
        response.on("close", done)
        response.on("error", done)
      }
    )
    const timer = setTimeout(() => {
      request.destroy()
      finish({ statusCode: null, error: `no answer within ${timeoutMs / 1000} s`, excerpt: null })
    }, timeoutMs)
    request.on("error", (error) => finish({ statusCode: null, error: error.message, excerpt: null }))
    request.end(body)
  })
