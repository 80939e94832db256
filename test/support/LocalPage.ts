import { Effect } from "effect"
import * as Http from "node:http"
import type * as Net from "node:net"

/** A small page server on loopback, closed with the scope. Pages are plain HTML with a title. */
export const serve = Effect.acquireRelease(
  Effect.promise(
    () =>
      new Promise<{ readonly url: string; readonly server: Http.Server }>((resolve) => {
        const server = Http.createServer((request, response) => {
          const title = new URL(request.url ?? "/", "http://x").searchParams.get("title") ?? "local page"
          response.writeHead(200, { "content-type": "text/html; charset=utf-8" })
          response.end(
            `<!doctype html><html><head><title>${title}</title></head>` +
              `<body style="margin:0;background:#1e90ff"><h1>${title}</h1></body></html>`
          )
        })
        server.listen(0, "127.0.0.1", () => {
          const { port } = server.address() as Net.AddressInfo
          resolve({ url: `http://127.0.0.1:${port}/`, server })
        })
      })
  ),
  ({ server }) =>
    Effect.promise(
      () =>
        new Promise<void>((resolve) => {
          server.closeAllConnections()
          server.close(() => resolve())
        })
    )
).pipe(Effect.map(({ url }) => url))
