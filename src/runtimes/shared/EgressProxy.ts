import { AdHosts } from "../../platform/net/AdHosts.ts"
import { Context, Effect, Layer, Metric, Redacted, Schema, type Scope } from "effect"
import * as Dgram from "node:dgram"
import * as Dns from "node:dns/promises"
import * as Fs from "node:fs/promises"
import * as Http from "node:http"
import * as Net from "node:net"
import * as ProxyChain from "proxy-chain"
import { PayloadTooLarge } from "../../kernel/Errors.ts"
import { MAX_BODY_BYTES } from "../../kernel/Validation.ts"
import { EgressSettings, HttpConfig } from "../../platform/config/Config.ts"
import { normalizeHost, type RefusalReason } from "../../platform/net/AddressPolicy.ts"
import { Egress, SERVICE_API_HOST } from "../../platform/net/Egress.ts"
import { egressRefused, upstreamFailures } from "../../platform/net/EgressMetrics.ts"
import type { EgressRegion } from "../../platform/net/Regions.ts"
import type {
  EgressCounters,
  EgressRefusal,
  EgressTap,
  UpstreamFailure,
  UpstreamFailureReason
} from "../../runtime/EgressTap.ts"

export class EgressProxyError extends Schema.TaggedError<EgressProxyError>()("EgressProxyError", {
  message: Schema.String,
  cause: Schema.optional(Schema.Defect())
}) {}

/**
 * One runtime's proxy: listening on a Unix socket (a browser's cell forwards
 * its loopback port there; a sandbox's supervisor does the same) before any
 * session exists, so a warm browser can be launched pointing at it; it
 * refuses everything until `bind` hands it to a session, then meters and
 * guards that session's traffic. No proxy listens on a TCP port: nothing on
 * the host's network can reach one.
 */
export interface EgressListener {
  /** The socket it listens on. */
  readonly path: string
  /** Binds to a session: from now on requests go out through `region`. Once only. */
  readonly bind: (region: EgressRegion) => EgressTap
}

const REASON_TEXT: Record<RefusalReason, string> = {
  private: "a private address",
  loopback: "this machine",
  link_local: "a link-local address (cloud metadata)",
  cgnat: "a carrier-grade NAT address",
  multicast: "a multicast address",
  unspecified: "an unspecified address",
  reserved: "a reserved address",
  service_port: "one of the service's own ports"
}

/** Whether `host` (as asked, and the address it resolved to) is on a session proxy's bypass list. */
const bypassed = (bypass: ReadonlyArray<string> | undefined, host: string, address: string) =>
  bypass !== undefined &&
  bypass.some((entry) => {
    const pattern = entry.toLowerCase()
    return pattern.startsWith("*.")
      ? host.endsWith(pattern.slice(1)) || host === pattern.slice(2)
      : host === pattern || address === pattern
  })

const hostPort = (address: string, port: number) =>
  Net.isIPv6(address) ? `[${address}]:${port}` : `${address}:${port}`

/** `http://name:port/path` with the host replaced by `address`. */
const withHost = (url: string, address: string) => {
  const parsed = new URL(url)
  parsed.hostname = Net.isIPv6(address) ? `[${address}]` : address
  return parsed.toString()
}

/** The local address the kernel routes to `address` from (UDP connect sends nothing). */
const outgoingAddress = (address: string, port: number) =>
  new Promise<string | undefined>((resolve) => {
    const socket = Dgram.createSocket(Net.isIPv6(address) ? "udp6" : "udp4")
    socket.once("error", () => {
      socket.close()
      resolve(undefined)
    })
    socket.connect(port, address, () => {
      const local = socket.address().address
      socket.close()
      resolve(normalizeHost(local.replace(/^::ffff:/, "")))
    })
  })

/** Headers a runtime's call carries to the service, and back. */
const API_REQUEST_HEADERS = [
  "authorization",
  "content-type",
  "accept",
  "if-match",
  "user-agent",
  "x-service-account"
]
const API_RESPONSE_HEADERS = ["content-type", "etag", "retry-after"]

/** The service's own answer to a body past its limit, as its routes give it. */
const tooLarge = (): ProxyChain.CustomResponse => {
  const refused = new PayloadTooLarge()
  return {
    statusCode: refused.status,
    headers: { "content-type": "application/json", connection: "close" },
    body: JSON.stringify({ error: { code: refused.code, message: refused.message } })
  }
}

/**
 * A request's body as a stream read only as fast as the service takes it (a few chunks ahead), that
 * fails once it passes `MAX_BODY_BYTES`: a page or a sandbox can make the proxy hold no more.
 */
const bounded = (request: Http.IncomingMessage) => {
  let total = 0
  let over = false
  // Read no further: what is left is discarded as it comes (or with the connection, which the answer
  // closes), never queued.
  const stop = () => {
    request.off("data", onData)
    request.resume()
  }
  let onData: (chunk: Buffer) => void = () => undefined
  const stream = new ReadableStream<Uint8Array>(
    {
      start(controller) {
        onData = (chunk: Buffer) => {
          total += chunk.length
          if (total > MAX_BODY_BYTES) {
            over = true
            stop()
            controller.error(new Error("the body is over the service's limit"))
            return
          }
          controller.enqueue(chunk)
          if ((controller.desiredSize ?? 0) <= 0) request.pause()
        }
        request.on("data", onData)
        request.once("end", () => {
          if (!over) controller.close()
        })
        request.once("error", (error) => controller.error(error))
        request.pause()
      },
      pull: () => {
        request.resume()
      },
      // The service answered before the body's end (a refusal): the rest goes unread.
      cancel: stop
    },
    { highWaterMark: 4 }
  )
  return { stream, exceeded: () => over }
}

const toServiceApi = (
  origin: string,
  isHttp: boolean,
  request: Http.IncomingMessage
): ProxyChain.PrepareRequestFunctionResult => {
  const target = new URL(request.url ?? "/", "http://x")
  if (!isHttp || !/^\/v[12]\/assistants\//.test(target.pathname)) {
    throw new ProxyChain.RequestError(
      `${SERVICE_API_HOST} serves an assistant runtime's routes (http://${SERVICE_API_HOST}/v1/assistants/..., /v2/assistants/...) alone.`,
      403
    )
  }
  return {
    customResponseFunction: async () => {
      const headers: Record<string, string> = {}
      for (const name of [...API_REQUEST_HEADERS, "content-length"]) {
        const value = request.headers[name]
        if (typeof value === "string") headers[name] = value
      }
      // A body the service would refuse is refused here: unread when it says its length, else as soon
      // as it passes the limit. Any other is passed on as it comes, never held whole.
      if (Number(headers["content-length"] ?? 0) > MAX_BODY_BYTES) return tooLarge()
      const method = request.method ?? "GET"
      const body = method === "GET" || method === "HEAD" ? undefined : bounded(request)
      const answer = await fetch(`${origin}${target.pathname}${target.search}`, {
        method,
        headers,
        ...(body === undefined ? {} : { body: body.stream, duplex: "half" as const })
      }).catch(() => undefined)
      if (body?.exceeded() === true) return tooLarge()
      if (answer === undefined) return { statusCode: 502, body: "The service did not answer." }
      const back: Record<string, string> = {}
      for (const name of API_RESPONSE_HEADERS) {
        const value = answer.headers.get(name)
        if (value !== null) back[name] = value
      }
      return { statusCode: answer.status, headers: back, body: Buffer.from(await answer.arrayBuffer()) }
    }
  }
}

/**
 * Asks the proxy at `path` for `url` (one of the service's own listeners),
 * which its SSRF guard refuses whatever `EGRESS_ALLOW_CIDRS` allows: the 403
 * proves it listens and guards, and a refused request moves no byte and
 * costs nothing.
 */
const ask = (path: string, url: string) =>
  new Promise<{ ok: boolean; detail: string }>((resolve, reject) => {
    const socket = Net.connect(path)
    let answer = ""
    socket.setEncoding("utf8")
    socket.on("data", (chunk: string) => {
      answer += chunk
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(answer)
      if (status !== null) {
        socket.destroy()
        resolve({
          ok: status[1] === "403",
          detail: `the egress proxy answered ${status[1]} to a request for one of the service's ports (its SSRF guard; unbilled)`
        })
      }
    })
    socket.once("error", reject)
    socket.once("close", () => reject(new Error("the egress proxy closed without answering")))
    socket.write(`GET ${url} HTTP/1.1\r\nHost: ${new URL(url).host}\r\nConnection: close\r\n\r\n`)
  })

/**
 * What proxy-chain answers a request it could not take through the session's own upstream
 * (`statuses.js`): 597 the upstream refused its credentials, 594 to 596 it could not be reached or
 * dropped the connection, 590 and 592 it answered a CONNECT with something else, 599 anything else.
 */
const UPSTREAM_STATUS: Record<number, UpstreamFailureReason> = {
  590: "refused",
  592: "refused",
  593: "unreachable",
  594: "unreachable",
  595: "unreachable",
  596: "unreachable",
  597: "auth_failed",
  599: "error"
}

const STATUS_LINE = /^HTTP\/1\.[01] (59\d) /

/** The status of a response head proxy-chain writes, when `chunk` starts one. */
const upstreamStatusOf = (chunk: unknown): number | undefined => {
  const head =
    typeof chunk === "string"
      ? chunk.slice(0, 13)
      : chunk instanceof Uint8Array && chunk[0] === 0x48
        ? Buffer.from(chunk.buffer, chunk.byteOffset, Math.min(13, chunk.length)).toString("latin1")
        : undefined
  const status = head === undefined ? undefined : STATUS_LINE.exec(head)?.[1]
  return status === undefined ? undefined : Number(status)
}

/** Opens per-runtime egress proxies (proxy-chain), each closed with the scope that opened it. */
export class EgressProxies extends Context.Service<
  EgressProxies,
  {
    /** A proxy listening on the Unix socket `path` (made anew; readable by its owner alone). */
    readonly listen: (path: string) => Effect.Effect<EgressListener, EgressProxyError, Scope.Scope>
  }
>()("rbs/egress/EgressProxies") {
  static readonly layerNoDeps = Layer.effect(
    EgressProxies,
    Effect.gen(function* () {
      const egress = yield* Egress
      const { host: serviceHost, port: servicePort } = yield* HttpConfig
      const serviceOrigin = `http://${serviceHost === "0.0.0.0" || serviceHost === "::" ? "127.0.0.1" : serviceHost.includes(":") ? `[${serviceHost}]` : serviceHost}:${servicePort}`
      // proxy-chain calls back outside any fiber: count refusals against the service's own metrics.
      const context = yield* Effect.context<never>()
      const { connectionsPerSession } = yield* EgressSettings
      const adHosts = yield* AdHosts
      const count = (reason: RefusalReason | "unbound" | "unresolved" | "connections" | "ad_host") =>
        Metric.withAttributes(egressRefused, { reason }).updateUnsafe(1, context)
      const refuse = (host: string, reason: RefusalReason) => {
        count(reason)
        return new ProxyChain.RequestError(
          `Refused by the egress policy: ${host} is ${REASON_TEXT[reason]}.`,
          403
        )
      }

      const listen = Effect.fnUntraced(function* (path: string) {
        let region: EgressRegion | undefined
        let proxyIp: string | undefined
        let closedUp = 0
        let closedDown = 0
        let upstreamFailure: UpstreamFailure | undefined
        const refusalListeners = new Set<(refusal: EgressRefusal) => void>()
        /** `error`, once every listener has heard of the refusal it answers. */
        const told = (host: string, port: number, reason: string, error: Error) => {
          const refusal = { host, port, reason, at: Date.now() }
          for (const listener of refusalListeners) {
            try {
              listener(refusal)
            } catch {
              // A listener's failure is its own.
            }
          }
          return error
        }
        const failed = (reason: UpstreamFailureReason, status: number) => {
          Metric.withAttributes(upstreamFailures, { reason }).updateUnsafe(1, context)
          upstreamFailure = { reason, status, at: new Date(), failures: (upstreamFailure?.failures ?? 0) + 1 }
        }
        /** Connections sent to the upstream: what proxy-chain answers on them is read for its 59x. */
        const watched = new WeakSet<Net.Socket>()
        const watch = (connection: Net.Socket) => {
          if (watched.has(connection)) return
          watched.add(connection)
          const sniff = (chunk: unknown) => {
            const status = upstreamStatusOf(chunk)
            const reason = status === undefined ? undefined : UPSTREAM_STATUS[status]
            if (reason !== undefined) failed(reason, status!)
          }
          // Its answers go out by `write`, its refusals by `end(message)` (which does not call `write`).
          const write = connection.write.bind(connection) as (...args: Array<any>) => boolean
          connection.write = ((chunk: unknown, ...rest: Array<unknown>) => {
            sniff(chunk)
            return write(chunk, ...rest)
          }) as typeof connection.write
          const end = connection.end.bind(connection) as (...args: Array<any>) => Net.Socket
          connection.end = ((chunk?: unknown, ...rest: Array<unknown>) => {
            if (typeof chunk !== "function") sniff(chunk)
            return end(chunk, ...rest)
          }) as typeof connection.end
        }
        // Keep-alive to destinations, for this browser only: no socket is shared across sessions.
        const agent = new Http.Agent({ keepAlive: true })

        const prepareRequestFunction = async ({
          hostname,
          port,
          isHttp,
          request
        }: ProxyChain.PrepareRequestFunctionOpts): Promise<ProxyChain.PrepareRequestFunctionResult> => {
          const bound = region
          if (bound === undefined) {
            // A browser that asks for anything before its session does so unasked: counted, to be seen.
            count("unbound")
            throw new ProxyChain.RequestError("This browser is not serving a session yet.", 403)
          }
          const host = normalizeHost(hostname)
          if (host === SERVICE_API_HOST) return toServiceApi(serviceOrigin, isHttp, request)
          // Refused before anything leaves: an ad or tracker host costs the session nothing.
          if (bound.blockAds === true && adHosts.blocks(host)) {
            count("ad_host")
            throw told(
              host,
              port,
              "ad_host",
              new ProxyChain.RequestError(`Blocked by block_ads: ${host} is an ad or tracker host.`, 403)
            )
          }
          let address: string
          if (Net.isIP(host) !== 0) {
            address = host
          } else {
            const resolved = await Dns.lookup(host, { all: true }).catch(() => [])
            if (resolved.length === 0) {
              count("unresolved")
              throw told(
                host,
                port,
                "unresolved",
                new ProxyChain.RequestError(`Cannot resolve ${host}.`, 502)
              )
            }
            // Every address the name has must pass, not just the first one we would use.
            for (const each of resolved) {
              const reason = egress.policy.refusal(each.address, port)
              if (reason !== undefined) throw told(host, port, reason, refuse(host, reason))
            }
            address = resolved[0]!.address
          }
          const reason = egress.policy.refusal(address, port)
          if (reason !== undefined) throw told(host, port, reason, refuse(host, reason))
          // Resolve once, connect to what was checked: the request goes on to the checked
          // address, so neither we nor an upstream proxy resolves the name again (no DNS
          // rebinding). The Host header and TLS inside a tunnel keep the name.
          request.url = isHttp ? withHost(request.url ?? "", address) : `${hostPort(address, port)}`
          if (bound.kind === "upstream") {
            // What the session shows is its upstream, even when a bypassed host comes first.
            proxyIp ??= bound.publicAddress
            if (!bypassed(bound.bypass, host, address)) {
              const upstreamProxyUrl =
                bound.guarded === true ? await checkedUpstream(bound.url) : Redacted.value(bound.url)
              if (bound.guarded === true) watch(request.socket)
              return { upstreamProxyUrl, httpAgent: agent }
            }
          }
          if (proxyIp === undefined) outgoingAddress(address, port).then((local) => (proxyIp ??= local))
          return { httpAgent: agent }
        }

        /**
         * A caller's own upstream, as any destination: every address its name has must pass the
         * address policy, and the connection goes to the address checked (an `https://` upstream
         * keeps its name, which its certificate is checked against).
         */
        const checkedUpstream = async (url: Redacted.Redacted<string>) => {
          const upstream = new URL(Redacted.value(url))
          const name = upstream.hostname.replace(/^\[(.*)\]$/, "$1")
          const upstreamPort = Number(upstream.port)
          const addresses =
            Net.isIP(name) !== 0
              ? [name]
              : (await Dns.lookup(name, { all: true }).catch(() => [])).map((each) => each.address)
          if (addresses.length === 0) {
            count("unresolved")
            failed("unreachable", 502)
            throw new ProxyChain.RequestError(`Cannot resolve the session's proxy ${name}.`, 502)
          }
          for (const each of addresses) {
            const reason = egress.policy.refusal(each, upstreamPort)
            if (reason !== undefined) {
              count(reason)
              failed("address_refused", 403)
              throw new ProxyChain.RequestError(
                `The session's proxy ${name} is refused by the service: ${REASON_TEXT[reason]}.`,
                403
              )
            }
          }
          const checked = addresses[0]!
          if (upstream.protocol !== "https:")
            upstream.hostname = Net.isIPv6(checked) ? `[${checked}]` : checked
          return upstream.toString().replace(/\/$/, "")
        }

        // proxy-chain serves the connections this socket accepts: its own listener stays unbound.
        const server = new ProxyChain.Server({ prepareRequestFunction, verbose: false })
        server.on("connectionClosed", ({ stats }: { stats?: ProxyChain.ConnectionStats }) => {
          closedUp += stats?.trgTxBytes ?? 0
          closedDown += stats?.trgRxBytes ?? 0
        })
        const socket = Net.createServer({ noDelay: true }, (connection) => {
          // proxy-chain drops a connection without a peer address (a socket closed under it): a Unix
          // socket has none, and this one's peer is the runtime the proxy serves.
          Object.defineProperty(connection, "remoteAddress", { value: "runtime", configurable: true })
          server.server.emit("connection", connection)
        })
        // Each connection is a descriptor of the service's: past the bound, one is closed as it comes.
        socket.maxConnections = connectionsPerSession
        socket.on("drop", () => count("connections"))
        let closing: Promise<void> | undefined
        const close = Effect.promise(
          () =>
            (closing ??= (async () => {
              agent.destroy()
              socket.close()
              // Its own server never listened: closing it only ends the connections it holds.
              await server.close(true).catch(() => undefined)
              // Sockets report their last bytes on their own `close`, a tick after the server's.
              await new Promise((resolve) => setImmediate(resolve))
            })())
        )
        yield* Effect.acquireRelease(
          Effect.tryPromise({
            try: async () => {
              await Fs.rm(path, { force: true })
              await new Promise<void>((resolve, reject) => {
                socket.once("error", reject)
                socket.listen({ path, backlog: 511 }, () => {
                  socket.off("error", reject)
                  resolve()
                })
              })
              await Fs.chmod(path, 0o600)
            },
            catch: (cause) => new EgressProxyError({ message: "cannot open an egress proxy", cause })
          }),
          () => close
        )

        const counters = (): EgressCounters => {
          let bytesUp = closedUp
          let bytesDown = closedDown
          for (const id of server.getConnectionIds()) {
            const stats = server.getConnectionStats(id)
            bytesUp += stats?.trgTxBytes ?? 0
            bytesDown += stats?.trgRxBytes ?? 0
          }
          return { bytesUp, bytesDown }
        }

        const probe = () => ask(path, `${serviceOrigin}/`)
        return {
          path,
          bind: (to: EgressRegion) => {
            region ??= to
            return {
              region: to,
              counters,
              proxyIp: () => proxyIp,
              upstreamFailure: () => upstreamFailure,
              onRefused: (listener) => {
                refusalListeners.add(listener)
                return () => refusalListeners.delete(listener)
              },
              close,
              probe
            }
          }
        } satisfies EgressListener
      })

      return EgressProxies.of({ listen })
    })
  )
}
