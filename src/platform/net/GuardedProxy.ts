/**
 * An HTTP proxy on 127.0.0.1 for a program the service runs on a user's
 * behalf (skopeo pulling a registry's image), so every connection it makes,
 * redirects included, meets the SSRF guard: each destination is resolved
 * here, each of its addresses checked by `policy`, and the connection made
 * to the address checked (a name that resolves otherwise on a second lookup
 * changes nothing). It speaks `CONNECT` (https) and absolute-URI requests
 * (plain http). A refusal answers 403 and is told to `onRefused`.
 */
import { Effect, Scope } from "effect"
import * as Dns from "node:dns/promises"
import * as Http from "node:http"
import * as Net from "node:net"
import type { AddressPolicy, RefusalReason } from "./AddressPolicy.ts"
import { normalizeHost } from "./AddressPolicy.ts"

export interface Refusal {
  readonly host: string
  readonly address: string
  readonly reason: RefusalReason | "unresolved"
}

/** Where `host` may be reached on `port`: its first address, once every one passed `policy`. */
const resolve = async (policy: AddressPolicy, host: string, port: number): Promise<string | Refusal> => {
  const literal = normalizeHost(host)
  const addresses = Net.isIP(literal)
    ? [literal]
    : await Dns.lookup(literal, { all: true, verbatim: true }).then(
        (found) => found.map((each) => each.address),
        () => []
      )
  if (addresses.length === 0) return { host, address: "", reason: "unresolved" }
  for (const address of addresses) {
    const reason = policy.refusal(address, port)
    if (reason !== undefined) return { host, address, reason }
  }
  return addresses[0]!
}

const refuse = (refusal: Refusal) =>
  `the SSRF guard refuses ${refusal.host}${refusal.address === "" || refusal.address === refusal.host ? "" : ` (${refusal.address})`}: ${refusal.reason}`

/** The proxy's URL (`http://127.0.0.1:PORT`), open for the scope's life. */
export const start = (
  policy: AddressPolicy,
  onRefused: (refusal: Refusal) => void = () => undefined
): Effect.Effect<string, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(
      () =>
        new Promise<{ readonly server: Http.Server; readonly sockets: Set<Net.Socket> }>((listening) => {
          const sockets = new Set<Net.Socket>()
          const server = Http.createServer((request, response) => {
            // Plain http: an absolute URI, forwarded to the checked address.
            let target: URL
            try {
              target = new URL(request.url ?? "")
            } catch {
              return response.writeHead(400).end()
            }
            if (target.protocol !== "http:") return response.writeHead(400).end()
            const port = Number(target.port || 80)
            void resolve(policy, target.hostname, port).then((checked) => {
              if (typeof checked !== "string") {
                onRefused(checked)
                return response.writeHead(403, { "content-type": "text/plain" }).end(refuse(checked))
              }
              const upstream = Http.request(
                {
                  host: checked,
                  port,
                  method: request.method,
                  path: `${target.pathname}${target.search}`,
                  headers: { ...request.headers, host: target.host }
                },
                (answer) => {
                  response.writeHead(answer.statusCode ?? 502, answer.headers)
                  answer.pipe(response)
                }
              )
              upstream.on("error", () => response.destroy())
              request.pipe(upstream)
            })
          })
          server.on("connect", (request: Http.IncomingMessage, client: Net.Socket, head: Buffer) => {
            const [host = "", portText = "443"] = (request.url ?? "").split(/:(?=\d+$)/)
            const port = Number(portText)
            client.on("error", () => client.destroy())
            void resolve(policy, host, port).then((checked) => {
              if (typeof checked !== "string") {
                onRefused(checked)
                client.end(`HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\n\r\n${refuse(checked)}`)
                return
              }
              const upstream = Net.connect(port, checked, () => {
                client.write("HTTP/1.1 200 Connection Established\r\n\r\n")
                if (head.length > 0) upstream.write(head)
                upstream.pipe(client)
                client.pipe(upstream)
              })
              upstream.on("error", () => client.destroy())
              client.on("close", () => upstream.destroy())
            })
          })
          // Every connection, tunnels too, ends with the proxy.
          server.on("connection", (socket: Net.Socket) => {
            sockets.add(socket)
            socket.once("close", () => sockets.delete(socket))
          })
          server.listen(0, "127.0.0.1", () => listening({ server, sockets }))
        })
    ),
    ({ server, sockets }) =>
      Effect.promise(
        () =>
          new Promise<void>((closed) => {
            server.close(() => closed())
            for (const socket of sockets) socket.destroy()
          })
      )
  ).pipe(
    Effect.map(({ server }) => {
      const address = server.address() as Net.AddressInfo
      return `http://127.0.0.1:${address.port}`
    })
  )
