import * as NodeSocket from "@effect/platform-node/NodeSocket"
import { Context, Effect, Exit, Fiber, Layer, Metric, Redacted, Scope } from "effect"
import { Runners } from "effect/cluster"
import { NetAddress } from "effect/net"
import { RpcClient, RpcSerialization } from "effect/rpc"
import { Socket, SocketServer } from "effect/socket"
import * as Fs from "node:fs"
import type * as Net from "node:net"
import * as Tls from "node:tls"
import type { HostPort } from "../config/HostPort.ts"

// The runner port between nodes, over TLS that both ends authenticate:
// effect/cluster's protocol takes any message to any session's entity from
// whoever reaches the port, so nothing of it is read before the peer has
// proved it is a node. Either with a key every node derives from
// `SECRETS_KEY` (TLS-PSK with an ephemeral ECDH exchange: mutual, and
// forward secret), or with certificates from a cluster CA the operator
// provides (`RUNNER_TLS_CA`, `RUNNER_TLS_CERT`, `RUNNER_TLS_KEY`): each end
// must present one the CA signed. A connection that fails is dropped and
// counted in `rbs_runner_connections_refused_total`.

/** How nodes prove themselves to each other on the runner port. */
export type RunnerCredentials =
  | { readonly _tag: "Key"; readonly key: Redacted.Redacted<Uint8Array> }
  | {
      readonly _tag: "Certificates"
      readonly ca: string
      readonly cert: string
      readonly key: string
    }

/** The identity a node names with the shared key (one for all: the key is what proves it). */
const PSK_IDENTITY = "rbs-node"
/** TLS 1.2's ECDHE-PSK suite: TLS 1.3 PSK is not offered by Node's TLS. */
const PSK_CIPHERS = "ECDHE-PSK-CHACHA20-POLY1305"

export const runnerRefused = Metric.counter("rbs_runner_connections_refused_total", {
  description:
    "Connections to this node's runner port dropped because the peer did not prove it is a node (no TLS, another key or certificate)"
})

/** The TLS options of each end for `credentials`. */
const tlsOptions = (credentials: RunnerCredentials) => {
  if (credentials._tag === "Key") {
    const psk = Buffer.from(Redacted.value(credentials.key))
    return {
      server: {
        ciphers: PSK_CIPHERS,
        maxVersion: "TLSv1.2",
        minVersion: "TLSv1.2",
        pskCallback: (_socket: Tls.TLSSocket, identity: string) => (identity === PSK_IDENTITY ? psk : null)
      } satisfies Tls.TlsOptions,
      client: {
        ciphers: PSK_CIPHERS,
        maxVersion: "TLSv1.2",
        minVersion: "TLSv1.2",
        pskCallback: () => ({ psk, identity: PSK_IDENTITY }),
        // No certificate: the key is the proof.
        checkServerIdentity: () => undefined
      } satisfies Tls.ConnectionOptions
    }
  }
  const files = {
    ca: Fs.readFileSync(credentials.ca),
    cert: Fs.readFileSync(credentials.cert),
    key: Fs.readFileSync(credentials.key)
  }
  return {
    server: {
      ...files,
      minVersion: "TLSv1.3",
      requestCert: true,
      rejectUnauthorized: true
    } satisfies Tls.TlsOptions,
    client: {
      ...files,
      minVersion: "TLSv1.3",
      rejectUnauthorized: true,
      // Any certificate the cluster's own CA signed is a node's, whatever name it carries.
      checkServerIdentity: () => undefined
    } satisfies Tls.ConnectionOptions
  }
}

/** The runner's server: TLS on `listen`, each authenticated connection handed to the RPC server. */
const makeServer = (listen: HostPort, options: Tls.TlsOptions) =>
  Effect.gen(function* () {
    const services = yield* Effect.context<never>()
    const refused = Metric.withAttributes(runnerRefused, {})
    const waiting = new Set<Tls.TLSSocket>()
    let onConnection = (conn: Tls.TLSSocket) => {
      waiting.add(conn)
      conn.once("close", () => waiting.delete(conn))
    }
    const server = Tls.createServer(options)
    server.on("tlsClientError", (_error, socket: Net.Socket) => {
      refused.updateUnsafe(1, services)
      socket.destroy()
    })
    server.on("secureConnection", (conn: Tls.TLSSocket) => {
      // Nothing is lost before the RPC server's reader takes the socket.
      conn.pause()
      onConnection(conn)
    })
    yield* Effect.acquireRelease(
      Effect.callback<void, SocketServer.SocketServerError>((resume) => {
        server.once("error", (cause) =>
          resume(
            Effect.fail(
              new SocketServer.SocketServerError({
                reason: new SocketServer.SocketServerOpenError({ cause })
              })
            )
          )
        )
        server.listen({ host: listen.host, port: listen.port }, () => resume(Effect.void))
      }),
      () =>
        Effect.callback<void>((resume) => {
          for (const conn of waiting) conn.destroy()
          server.close(() => resume(Effect.void))
        })
    )
    const bound = server.address() as Net.AddressInfo
    const address = NetAddress.inetAddressFromIpString(bound.address, bound.port)
    if (address._tag === "Failure")
      return yield* new SocketServer.SocketServerError({
        reason: new SocketServer.SocketServerOpenError({ cause: address.failure })
      })

    const run = <R, E, _>(handler: (socket: Socket.Socket) => Effect.Effect<_, E, R>) =>
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const context = yield* Effect.context<R>()
        const serve = (conn: Tls.TLSSocket) =>
          NodeSocket.fromDuplex(
            Effect.acquireRelease(Effect.succeed(conn), (open) =>
              Effect.sync(() => {
                if (!open.destroyed) open.destroySoon()
              })
            ),
            { tlsServer: true }
          ).pipe(
            Effect.flatMap(handler),
            Effect.ignoreCause({ log: "Unhandled", message: "runner connection failed" }),
            Effect.runForkWith(Context.add(context, NodeSocket.NetSocket, conn)),
            Fiber.runIn(scope)
          )
        const previous = onConnection
        onConnection = serve
        for (const conn of waiting) {
          waiting.delete(conn)
          serve(conn)
        }
        return yield* Effect.never.pipe(
          Effect.ensuring(
            Effect.suspend(() => {
              onConnection = previous
              return Scope.close(scope, Exit.void)
            })
          )
        )
      })

    return SocketServer.SocketServer.of({ address: address.success, run })
  })

/** The runner's socket server and its client protocol to the other nodes, both over TLS with `credentials`. */
export const layer = (listen: HostPort, credentials: RunnerCredentials) => {
  const options = tlsOptions(credentials)
  const server = Layer.effect(SocketServer.SocketServer, makeServer(listen, options.server))
  const client = Layer.effect(
    Runners.RpcClientProtocol,
    Effect.gen(function* () {
      const serialization = yield* RpcSerialization.RpcSerialization
      return {
        codecFor: serialization.codecFor,
        make: Effect.fnUntraced(function* (address: { readonly host: string; readonly port: number }) {
          const socket = yield* NodeSocket.makeTls({
            ...options.client,
            host: address.host,
            port: address.port,
            openTimeout: 1000,
            timeout: 5500
          })
          return yield* RpcClient.makeProtocolSocket().pipe(
            Effect.provideService(Socket.Socket, socket),
            Effect.provideService(RpcSerialization.RpcSerialization, serialization)
          )
        }, Effect.orDie)
      }
    })
  )
  return { server, client }
}
