import { Clock, Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import { Secrets } from "../auth/Secrets.ts"
import { signer } from "../auth/Signed.ts"
import { ServiceConfig } from "../Config.ts"

/** The header a relaying node sends its token in (never the user's key). */
export const HOP_HEADER = "x-rbs-node-token"

/** A hop token is used at once, to open one connection. */
export const HOP_TOKEN_TTL_MS = 30_000

/** `{ sid, pur, exp, from }`: the session, what the connection is for, until when, and who vouches. */
const ClaimsCodec = Schema.StringFromBase64Url.pipe(
  Schema.decodeTo(
    Schema.fromJsonString(
      Schema.Struct({ sid: Schema.String, pur: Schema.String, exp: Schema.Finite, from: Schema.String })
    )
  )
)
const encodeClaims = Schema.encodeSync(ClaimsCodec)
const decodeClaims = Schema.decodeUnknownOption(ClaimsCodec)

/**
 * The internal hop between nodes: a connection (CDP now; live view and PTY
 * later) that lands on a node other than the session's is relayed to the
 * owner's `/internal/...` route, carrying a short-lived token this node signs
 * with the cluster's shared key. The relaying node has already authenticated
 * the user and checked their access to the session; the token says so for
 * that one session and purpose, and nothing else.
 */
export class NodeHop extends Context.Service<
  NodeHop,
  {
    /** The WebSocket URL and headers that reach `path` on the node at `nodeUrl` for `sessionId`. */
    readonly target: (
      nodeUrl: string,
      path: string,
      sessionId: string,
      purpose: string
    ) => Effect.Effect<{ readonly url: string; readonly headers: Record<string, string> }>
    /** The HTTP URL and headers that reach `path` on the node at `nodeUrl` for `sessionId` (a plain request). */
    readonly request: (
      nodeUrl: string,
      path: string,
      sessionId: string,
      purpose: string
    ) => Effect.Effect<{ readonly url: string; readonly headers: Record<string, string> }>
    /** Whether `token` was signed by a node of this cluster for this session and purpose, and is still valid. */
    readonly verify: (token: string | undefined, sessionId: string, purpose: string) => Effect.Effect<boolean>
  }
>()("rbs/cluster/NodeHop") {
  static readonly layer = Layer.effect(
    NodeHop,
    Effect.gen(function* () {
      const config = yield* ServiceConfig
      const tokens = signer(Redacted.value((yield* Secrets).nodeTokenKey))

      const request = (nodeUrl: string, path: string, sessionId: string, purpose: string) =>
        Effect.map(Clock.currentTimeMillis, (now) => ({
          url: `${nodeUrl}${path}`,
          headers: {
            [HOP_HEADER]: tokens.sign(
              encodeClaims({ sid: sessionId, pur: purpose, exp: now + HOP_TOKEN_TTL_MS, from: config.nodeId })
            )
          }
        }))

      const target = (nodeUrl: string, path: string, sessionId: string, purpose: string) =>
        Effect.map(request(nodeUrl, path, sessionId, purpose), (hop) => ({
          ...hop,
          url: hop.url.replace(/^http(s?):\/\//, "ws$1://")
        }))

      const verify = (token: string | undefined, sessionId: string, purpose: string) =>
        Effect.map(Clock.currentTimeMillis, (now) =>
          token === undefined
            ? false
            : tokens.open(token).pipe(
                Option.flatMap(decodeClaims),
                Option.exists(
                  (claims) => claims.sid === sessionId && claims.pur === purpose && claims.exp > now
                )
              )
        )

      return NodeHop.of({ target, request, verify })
    })
  )
}
