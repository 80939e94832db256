// The client side of the egress bench, in a process of its own (the browser in
// real use): downloads and small requests, directly or through the proxy, each
// timed here. Arguments: originPort proxySocket largeMb smallRequests rounds linkMBps.
// Prints the samples as JSON.
import * as Http from "node:http"
import * as Net from "node:net"

const [originText, proxySocket, ...rest] = process.argv.slice(2) as [string, string, ...Array<string>]
const originPort = Number(originText)
const [largeMb, smallRequests, rounds, linkMBps] = rest.map(Number) as [number, number, number, number]
const target = `127.0.0.1:${originPort}`
const largeBytes = largeMb * 1024 * 1024

/** Raw HTTP/1.1 over a socket: to the origin itself, or to it inside a CONNECT tunnel of the proxy. */
const rawDownload = (viaTunnel: boolean, rate = 0) =>
  new Promise<number>((resolve, reject) => {
    const started = performance.now()
    const socket = viaTunnel ? Net.connect(proxySocket) : Net.connect(originPort, "127.0.0.1")
    const request = `GET /large?mb=${largeMb}&rate=${rate} HTTP/1.1\r\nHost: ${target}\r\nConnection: close\r\n\r\n`
    let stage: "connect" | "head" | "body" = viaTunnel ? "connect" : "head"
    let pending = Buffer.alloc(0)
    let received = 0
    socket.on("connect", () =>
      socket.write(viaTunnel ? `CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n` : request)
    )
    socket.on("data", (data: Buffer) => {
      if (stage === "body") {
        received += data.length
        return
      }
      pending = Buffer.concat([pending, data])
      const end = pending.indexOf("\r\n\r\n")
      if (end < 0) return
      const rest = pending.subarray(end + 4)
      pending = Buffer.alloc(0)
      if (stage === "connect") {
        stage = "head"
        socket.write(request)
      } else {
        stage = "body"
        received += rest.length
      }
    })
    socket.on("close", () =>
      received === largeBytes
        ? resolve((performance.now() - started) / 1000)
        : reject(new Error(`got ${received} of ${largeBytes} bytes`))
    )
    socket.on("error", reject)
  })

/** Node's HTTP client: to the origin, or to the proxy with an absolute URI (how browsers send http://). */
const httpDownload = (viaProxy: boolean) =>
  new Promise<number>((resolve, reject) => {
    const started = performance.now()
    let received = 0
    const options: Http.RequestOptions = viaProxy
      ? { socketPath: proxySocket, path: `http://${target}/large?mb=${largeMb}`, agent: false }
      : { host: "127.0.0.1", port: originPort, path: `/large?mb=${largeMb}`, agent: false }
    Http.get(options, (response) => {
      response.on("data", (data: Buffer) => (received += data.length))
      response.on("end", () =>
        received === largeBytes
          ? resolve((performance.now() - started) / 1000)
          : reject(new Error(`got ${received} bytes`))
      )
    }).on("error", reject)
  })

/** Mean milliseconds per small GET, one at a time on one keep-alive connection. */
const small = async (viaProxy: boolean) => {
  const agent = new Http.Agent({ keepAlive: true, maxSockets: 1 })
  const one = () =>
    new Promise<void>((resolve, reject) => {
      const options: Http.RequestOptions = viaProxy
        ? { socketPath: proxySocket, path: `http://${target}/ok`, agent }
        : { host: "127.0.0.1", port: originPort, path: "/ok", agent }
      Http.get(options, (response) => {
        response.resume()
        response.on("end", resolve)
      }).on("error", reject)
    })
  for (let i = 0; i < 50; i++) await one()
  const started = performance.now()
  for (let i = 0; i < smallRequests; i++) await one()
  const elapsed = performance.now() - started
  agent.destroy()
  return elapsed / smallRequests
}

const samples = {
  httpDirect: [] as Array<number>,
  httpProxy: [] as Array<number>,
  rawDirect: [] as Array<number>,
  rawTunnel: [] as Array<number>,
  linkDirect: [] as Array<number>,
  linkTunnel: [] as Array<number>,
  smallDirect: [] as Array<number>,
  smallProxy: [] as Array<number>
}
for (let round = 0; round < rounds; round++) {
  samples.httpDirect.push(await httpDownload(false))
  samples.httpProxy.push(await httpDownload(true))
  samples.rawDirect.push(await rawDownload(false))
  samples.rawTunnel.push(await rawDownload(true))
  samples.linkDirect.push(await rawDownload(false, linkMBps))
  samples.linkTunnel.push(await rawDownload(true, linkMBps))
  samples.smallDirect.push(await small(false))
  samples.smallProxy.push(await small(true))
  process.stderr.write(`[bench] round ${round + 1}/${rounds} done\n`)
}
process.stdout.write(JSON.stringify(samples))
