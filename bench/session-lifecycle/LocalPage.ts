import * as Http from "node:http"
import type { AddressInfo } from "node:net"

const HTML = `<!doctype html>
<html>
  <head><meta charset="utf-8"><title>session-lifecycle bench</title></head>
  <body style="font-family: sans-serif">
    <h1>session-lifecycle bench</h1>
    <p>A small static page, so navigation time is the browser's and not the network's.</p>
  </body>
</html>`

export interface LocalPage {
  readonly url: string
  readonly close: () => Promise<void>
}

/** The page every flow navigates to, on loopback only (port 0: the OS picks a free one). */
export const serveLocalPage = (): Promise<LocalPage> =>
  new Promise((resolve, reject) => {
    const server = Http.createServer((request, response) => {
      if (request.url !== "/") {
        response.writeHead(404).end()
        return
      }
      response.writeHead(200, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" })
      response.end(HTML)
    })
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resolve({
        url: `http://127.0.0.1:${port}/`,
        close: () =>
          new Promise((done) => {
            server.closeAllConnections()
            server.close(() => done())
          })
      })
    })
  })
