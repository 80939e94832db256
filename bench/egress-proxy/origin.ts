// The destination of the egress bench, in a process of its own (a remote site
// in real use): `GET /large?mb=N` streams N MB from memory (`&rate=R` paces it
// at R MB/s, like a network link), anything else answers two bytes. Prints
// its port.
import * as Http from "node:http"
import type * as Net from "node:net"

const chunk = Buffer.alloc(1024 * 1024, 120)
const server = Http.createServer((request, response) => {
  const url = new URL(request.url ?? "/", "http://x")
  if (url.pathname === "/large") {
    const total = Number(url.searchParams.get("mb") ?? "1") * chunk.length
    const rate = Number(url.searchParams.get("rate") ?? "0") * 1024 * 1024
    response.writeHead(200, { "content-length": String(total) })
    const started = performance.now()
    let sent = 0
    const pump = () => {
      while (sent < total) {
        // Paced: never ahead of what the link would have carried by now.
        const allowed = rate > 0 ? ((performance.now() - started) / 1000) * rate : total
        if (sent >= allowed) return void setTimeout(pump, 1)
        const part = chunk.subarray(0, Math.min(chunk.length, total - sent, Math.max(65536, allowed - sent)))
        sent += part.length
        if (!response.write(part)) return void response.once("drain", pump)
      }
      response.end()
    }
    return pump()
  }
  response.writeHead(200, { "content-type": "text/plain", "content-length": "2" })
  response.end("ok")
})
server.keepAliveTimeout = 60_000
server.listen(0, "127.0.0.1", () => process.stdout.write(`${(server.address() as Net.AddressInfo).port}\n`))
process.on("SIGTERM", () => process.exit(0))
