import { Context, Duration, Effect, Layer } from "effect"
import { RunnerAddress, Runners } from "effect/cluster"
import { RpcClient } from "effect/rpc"

/**
 * How long placement waits for another node's runner to answer before it
 * takes that node out of this create's candidates: a killed node's port
 * refuses at once; a machine gone from the network answers nothing.
 */
export const PROBE_TIMEOUT = Duration.millis(500)

/**
 * Whether a node's runner answers now, asked by placement before it picks the
 * node: a heartbeat says only that the node lived a beat ago, and a session
 * placed on a node that has just died would end `node_lost` at once.
 */
export class NodeProbe extends Context.Service<
  NodeProbe,
  {
    /** Whether the runner at `address` (`host:port`, a node's `RUNNER_ADDRESS`) answers a ping in time. */
    readonly answers: (address: string) => Effect.Effect<boolean>
  }
>()("rbs/cluster/NodeProbe") {
  /** One node: no other runner to ask. */
  static readonly layerNone = Layer.succeed(NodeProbe, NodeProbe.of({ answers: () => Effect.succeed(true) }))

  /**
   * The runner protocol's own ping over a connection of its own, authenticated
   * like every runner connection (`RunnerTransport`), closed after the answer.
   * Never a client the cluster caches: one cached across a node's restart at
   * the same address keeps failing a node that is back.
   */
  static readonly layerPing = Layer.effect(
    NodeProbe,
    Effect.gen(function* () {
      const protocols = yield* Runners.RpcClientProtocol
      return NodeProbe.of({
        answers: (address) => {
          const at = address.lastIndexOf(":")
          const host = address.slice(0, at).replace(/^\[(.*)\]$/, "$1")
          const port = Number(address.slice(at + 1))
          if (at <= 0 || !Number.isInteger(port)) return Effect.succeed(false)
          return protocols.make(RunnerAddress.make(host, port)).pipe(
            Effect.flatMap((protocol) =>
              Runners.makeRpcClient.pipe(Effect.provideService(RpcClient.Protocol, protocol))
            ),
            Effect.flatMap((client) => client.Ping()),
            Effect.scoped,
            Effect.timeout(PROBE_TIMEOUT),
            Effect.isSuccess
          )
        }
      })
    })
  )
}
