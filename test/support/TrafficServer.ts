import { Effect } from "effect"
import * as Http from "node:http"
import * as Https from "node:https"
import type * as Net from "node:net"
import { generate } from "selfsigned"
import { WebSocketServer } from "ws"

/** What crossed the wire at the servers' sockets, TLS included. */
export interface WireCounts {
  /** Bytes the servers read: what clients sent. */
  readonly bytesIn: number
  /** Bytes the servers wrote: what clients received. */
  readonly bytesOut: number
}

export interface TrafficServer {
  readonly http: string
  readonly https: string
  readonly ws: string
  readonly port: number
  /** The PEM certificate of the HTTPS server (self-signed for `host`). */
  readonly certificate: string
  readonly counts: () => WireCounts
  /** The peer addresses connections came from. */
  readonly remoteAddresses: () => ReadonlySet<string>
  readonly requests: () => ReadonlyArray<string>
}

const page = (title: string) =>
  `<!doctype html><html><head><title>${title}</title><link rel="icon" href="data:,"></head><body><h1>${title}</h1></body></html>`

/**
 * HTTP, HTTPS and WebSocket endpoints on one loopback address, counting every
 * byte at their sockets: the ground truth the egress counters are compared
 * with. `GET /page`, `GET /bytes?n=N` (N bytes), `POST /upload`, `GET /ws` (echo).
 */
export const serve = (host = "127.0.0.2") =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const pems = await generate([{ name: "commonName", value: host }], {
        keySize: 2048,
        algorithm: "sha256",
        extensions: [{ name: "subjectAltName", altNames: [{ type: 7, ip: host }] }]
      })
      const sockets = new Set<Net.Socket>()
      const remotes = new Set<string>()
      const requests: Array<string> = []
      const track = (socket: Net.Socket) => {
        sockets.add(socket)
        if (socket.remoteAddress !== undefined) remotes.add(socket.remoteAddress)
      }
      const handler = (request: Http.IncomingMessage, response: Http.ServerResponse) => {
        const url = new URL(request.url ?? "/", "http://x")
        requests.push(`${request.method} ${url.pathname}`)
        if (url.pathname === "/bytes") {
          const size = Number(url.searchParams.get("n") ?? "0")
          response.writeHead(200, {
            "content-type": "application/octet-stream",
            "content-length": String(size),
            "access-control-allow-origin": "*"
          })
          const chunk = Buffer.alloc(64 * 1024, 120)
          let left = size
          const pump = () => {
            while (left > 0) {
              const part = chunk.subarray(0, Math.min(left, chunk.length))
              left -= part.length
              if (!response.write(part)) return response.once("drain", pump)
            }
            response.end()
          }
          return pump()
        }
        if (url.pathname === "/redirect") {
          response.writeHead(302, { location: url.searchParams.get("to") ?? "/" })
          return response.end()
        }
        if (url.pathname === "/upload") {
          let received = 0
          request.on("data", (chunk: Buffer) => (received += chunk.length))
          request.on("end", () => {
            response.writeHead(200, { "content-type": "application/json" })
            response.end(JSON.stringify({ received }))
          })
          return
        }
        response.writeHead(200, { "content-type": "text/html; charset=utf-8" })
        response.end(page(url.searchParams.get("title") ?? "traffic"))
      }
      const plain = Http.createServer(handler)
      const secure = Https.createServer({ key: pems.private, cert: pems.cert }, handler)
      const wss = new WebSocketServer({ noServer: true })
      wss.on("connection", (socket) =>
        socket.on("message", (data, isBinary) => socket.send(data, { binary: isBinary }))
      )
      for (const server of [plain, secure]) {
        server.on("connection", track)
        server.on("upgrade", (request, socket, head) =>
          wss.handleUpgrade(request, socket as Net.Socket, head, (ws) => wss.emit("connection", ws, request))
        )
      }
      const listen = (server: Http.Server) =>
        new Promise<number>((resolve) =>
          server.listen(0, host, () => resolve((server.address() as Net.AddressInfo).port))
        )
      const [httpPort, httpsPort] = await Promise.all([listen(plain), listen(secure)])
      const counts = (): WireCounts => {
        let bytesIn = 0
        let bytesOut = 0
        for (const socket of sockets) {
          bytesIn += socket.bytesRead
          bytesOut += socket.bytesWritten
        }
        return { bytesIn, bytesOut }
      }
      const info: TrafficServer = {
        http: `http://${host}:${httpPort}`,
        https: `https://${host}:${httpsPort}`,
        ws: `ws://${host}:${httpPort}/ws`,
        port: httpPort,
        certificate: pems.cert,
        counts,
        remoteAddresses: () => remotes,
        requests: () => requests
      }
      return { info, servers: [plain, secure], wss }
    }),
    ({ servers, wss }) =>
      Effect.promise(async () => {
        wss.close()
        await Promise.all(
          servers.map(
            (server) =>
              new Promise<void>((resolve) => {
                server.closeAllConnections()
                server.close(() => resolve())
              })
          )
        )
      })
  ).pipe(Effect.map(({ info }) => info))
