import { Effect } from "effect"
import * as Http from "node:http"
import type * as Net from "node:net"

// A page with a worker and a service worker on loopback, each request's headers kept: what the
// browser tests read a browser's identity from, as a site does.

/** What a request said of its browser. */
export interface Seen {
  readonly userAgent: string
  readonly acceptLanguage: string
  /** `Sec-CH-UA`, when the request carried client hints. */
  readonly hints: string | undefined
}

/** `page` at every path but `/worker.js` and `/sw.js`, which serve `worker` and `serviceWorker`; closed with the scope. */
export const serve = (page: string, worker: string, serviceWorker: string) =>
  Effect.acquireRelease(
    Effect.promise(
      () =>
        new Promise<{ readonly url: string; readonly server: Http.Server; readonly seen: Array<Seen> }>(
          (resolve) => {
            const seen: Array<Seen> = []
            const server = Http.createServer((request, response) => {
              seen.push({
                userAgent: String(request.headers["user-agent"]),
                acceptLanguage: String(request.headers["accept-language"]),
                hints: request.headers["sec-ch-ua"] as string | undefined
              })
              const script =
                request.url === "/worker.js" ? worker : request.url === "/sw.js" ? serviceWorker : null
              response.writeHead(200, {
                "content-type": script === null ? "text/html; charset=utf-8" : "text/javascript"
              })
              response.end(script ?? page)
            })
            server.listen(0, "127.0.0.1", () =>
              resolve({ url: `http://127.0.0.1:${(server.address() as Net.AddressInfo).port}`, server, seen })
            )
          }
        )
    ),
    ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
  )
