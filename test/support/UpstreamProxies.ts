import { Effect } from "effect"
import * as Net from "node:net"
import * as ProxyChain from "proxy-chain"

/** What an upstream proxy under test saw: each destination asked for, and each refused login. */
export interface SeenByUpstream {
  readonly port: number
  /** `host:port` of each request or tunnel it carried. */
  readonly destinations: Array<string>
  /** Logins it refused (a wrong user or password). */
  readonly refused: Array<string>
}

/** An HTTP proxy on loopback that asks for `username` and `password`, closed with the scope. */
export const http = (username: string, password: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const seen = { destinations: [] as Array<string>, refused: [] as Array<string> }
      const server = new ProxyChain.Server({
        port: 0,
        host: "127.0.0.1",
        verbose: false,
        prepareRequestFunction: ({ hostname, port, username: user, password: pass }) => {
          if (user !== username || pass !== password) {
            seen.refused.push(`${user}:${pass}`)
            return { requestAuthentication: true }
          }
          seen.destinations.push(`${hostname}:${port}`)
          return {}
        }
      })
      await server.listen()
      return { server, seen: { port: server.port, ...seen } as SeenByUpstream }
    }),
    ({ server }) => Effect.promise(() => server.close(true))
  ).pipe(Effect.map(({ seen }) => seen))

/**
 * A SOCKS5 proxy on loopback (RFC 1928, CONNECT only) that asks for `username` and `password`
 * (RFC 1929), closed with the scope.
 */
export const socks5 = (username: string, password: string) =>
  Effect.acquireRelease(
    Effect.promise(
      () =>
        new Promise<{ readonly server: Net.Server; readonly seen: SeenByUpstream; sockets: Set<Net.Socket> }>(
          (resolve) => {
            const destinations: Array<string> = []
            const refused: Array<string> = []
            const sockets = new Set<Net.Socket>()
            const server = Net.createServer((client) => {
              sockets.add(client)
              client.on("close", () => sockets.delete(client))
              client.on("error", () => client.destroy())
              let buffered = Buffer.alloc(0)
              let stage: "greeting" | "auth" | "request" | "open" = "greeting"
              const onData = (chunk: Buffer) => {
                buffered = Buffer.concat([buffered, chunk])
                if (stage === "greeting") {
                  if (buffered.length < 2 || buffered.length < 2 + buffered[1]!) return
                  const methods = buffered.subarray(2, 2 + buffered[1]!)
                  buffered = buffered.subarray(2 + buffered[1]!)
                  if (!methods.includes(2)) return client.end(Buffer.from([5, 0xff]))
                  client.write(Buffer.from([5, 2]))
                  stage = "auth"
                }
                if (stage === "auth") {
                  if (buffered.length < 2) return
                  const userLength = buffered[1]!
                  if (buffered.length < 3 + userLength) return
                  const passLength = buffered[2 + userLength]!
                  if (buffered.length < 3 + userLength + passLength) return
                  const user = buffered.subarray(2, 2 + userLength).toString()
                  const pass = buffered.subarray(3 + userLength, 3 + userLength + passLength).toString()
                  buffered = buffered.subarray(3 + userLength + passLength)
                  if (user !== username || pass !== password) {
                    refused.push(`${user}:${pass}`)
                    return client.end(Buffer.from([1, 1]))
                  }
                  client.write(Buffer.from([1, 0]))
                  stage = "request"
                }
                if (stage === "request") {
                  if (buffered.length < 5) return
                  const type = buffered[3]!
                  const length = type === 1 ? 4 : type === 4 ? 16 : 1 + buffered[4]!
                  if (buffered.length < 4 + length + 2) return
                  const raw = buffered.subarray(4, 4 + length)
                  const host =
                    type === 1
                      ? [...raw].join(".")
                      : type === 4
                        ? (raw.toString("hex").match(/.{4}/g) ?? []).join(":")
                        : raw.subarray(1).toString()
                  const port = buffered.readUInt16BE(4 + length)
                  const rest = buffered.subarray(4 + length + 2)
                  stage = "open"
                  client.off("data", onData)
                  destinations.push(`${host}:${port}`)
                  const target = Net.connect(port, host, () => {
                    client.write(Buffer.from([5, 0, 0, 1, 0, 0, 0, 0, 0, 0]))
                    if (rest.length > 0) target.write(rest)
                    client.pipe(target).pipe(client)
                  })
                  sockets.add(target)
                  target.on("close", () => sockets.delete(target))
                  target.on("error", () => {
                    client.end(Buffer.from([5, 5, 0, 1, 0, 0, 0, 0, 0, 0]))
                  })
                }
              }
              client.on("data", onData)
            })
            server.listen(0, "127.0.0.1", () =>
              resolve({
                server,
                sockets,
                seen: { port: (server.address() as Net.AddressInfo).port, destinations, refused }
              })
            )
          }
        )
    ),
    ({ server, sockets }) =>
      Effect.promise(
        () =>
          new Promise<void>((resolve) => {
            for (const socket of sockets) socket.destroy()
            server.close(() => resolve())
          })
      )
  ).pipe(Effect.map(({ seen }) => seen))
