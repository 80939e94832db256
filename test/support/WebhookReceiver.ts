// A real HTTP receiver on loopback for webhook tests: records every request
// and answers with the statuses it is told to, in turn (then 200).
import { Effect } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"

export interface Received {
  readonly headers: Http.IncomingHttpHeaders
  readonly body: string
  readonly at: number
}

/** `delayMs`: each answer waits this long (a slow endpoint); `peak` is the most requests open at once. */
export const serveWith = (options: { readonly delayMs?: number } = {}) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const received: Array<Received> = []
      const peak = { open: 0, most: 0 }
      const statuses: Array<number> = []
      const waiters: Array<() => void> = []
      // While held, requests arrive (counted) and wait for `release` before they are answered.
      let gate: { readonly opened: Promise<void>; readonly open: () => void } | undefined
      let arrived = 0
      const server = Http.createServer((request, response) => {
        const chunks: Array<Buffer> = []
        request.on("data", (chunk: Buffer) => chunks.push(chunk))
        peak.open++
        peak.most = Math.max(peak.most, peak.open)
        request.on("end", async () => {
          arrived++
          if (gate !== undefined) await gate.opened
          if (options.delayMs !== undefined)
            await new Promise((resolve) => setTimeout(resolve, options.delayMs))
          peak.open--
          received.push({
            headers: request.headers,
            body: Buffer.concat(chunks).toString("utf8"),
            at: Date.now()
          })
          const status = statuses.shift() ?? 200
          response.writeHead(status, { "content-type": "text/plain" })
          response.end(status === 200 ? "thanks" : `no: ${status}`)
          for (const wake of waiters.splice(0)) wake()
        })
      })
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
      const port = (server.address() as AddressInfo).port
      /** Waits until `count` requests have arrived (20 s at most). */
      const waitFor = (count: number, timeoutMs = 20_000) =>
        Effect.promise(async () => {
          const deadline = Date.now() + timeoutMs
          while (received.length < count) {
            if (Date.now() > deadline)
              throw new Error(`${received.length} of ${count} webhook requests arrived`)
            await new Promise<void>((resolve) => {
              waiters.push(resolve)
              setTimeout(resolve, 100)
            })
          }
          return received.slice(0, count)
        })
      return {
        server,
        url: `http://127.0.0.1:${port}/hook`,
        received,
        peak,
        /** The next answers' statuses, in order; 200 once they are used up. */
        answer: (...next: Array<number>) => statuses.push(...next),
        /** Holds every request from now on unanswered, until `release`. */
        hold: () => {
          let open = () => {}
          const opened = new Promise<void>((resolve) => (open = resolve))
          gate = { opened, open }
        },
        release: () => {
          gate?.open()
          gate = undefined
        },
        /** Requests that have arrived, answered or held. */
        arrived: () => arrived,
        waitFor
      }
    }),
    ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
  ).pipe(Effect.map(({ server: _server, ...rest }) => rest))

export const serve = serveWith()
