// A bare pipe to one port or Unix socket (a browser's cell's DevTools), run in
// a process of its own: the least any relay process between a client and
// Chromium can cost (no WebSocket framing, no guard, bytes copied through as
// they come). Started by run.ts.
import * as Net from "node:net"

const target = process.argv[2]!
const server = Net.createServer({ noDelay: true }, (client) => {
  const upstream = /^\d+$/.test(target)
    ? Net.connect({ host: "127.0.0.1", port: Number(target), noDelay: true })
    : Net.connect({ path: target })
  client.pipe(upstream).pipe(client)
  const close = () => {
    client.destroy()
    upstream.destroy()
  }
  client.on("error", close).on("close", close)
  upstream.on("error", close).on("close", close)
})
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`${(server.address() as Net.AddressInfo).port}\n`)
})
process.on("SIGTERM", () => process.exit(0))
