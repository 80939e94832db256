import { Clock, Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import * as Crypto from "node:crypto"
import type { RequestOrigin } from "../../features/policy/AuthMiddleware.ts"
import { Secrets } from "../../platform/crypto/Secrets.ts"
import { signer } from "../../platform/crypto/Signed.ts"
import { NodeConfig } from "../../platform/config/Config.ts"
import { type Owner, OwnerSchema } from "../../kernel/Owner.ts"

/** The header a relaying node sends its token in (never the user's key). */
export const HOP_HEADER = "x-rbs-node-token"

/** A hop token is used at once, to open one connection. */
export const HOP_TOKEN_TTL_MS = 30_000

/**
 * `{ sid, pur, exp, from, to, m, p, n, own?, ip?, ua? }`: the session, what
 * the connection is for, until when, who vouches, the node it is for, the
 * one request it opens (its method and path), a nonce that makes it good
 * once, and for whom (the owner the relaying node authorized, with the
 * client's address and user agent for the audit trail).
 */
const ClaimsCodec = Schema.StringFromBase64Url.pipe(
  Schema.decodeTo(
    Schema.fromJsonString(
      Schema.Struct({
        sid: Schema.String,
        pur: Schema.String,
        exp: Schema.Finite,
        from: Schema.String,
        to: Schema.String,
        m: Schema.String,
        p: Schema.String,
        n: Schema.String,
        own: Schema.optionalKey(OwnerSchema),
        ip: Schema.optionalKey(Schema.NullOr(Schema.String)),
        ua: Schema.optionalKey(Schema.NullOr(Schema.String))
      })
    )
  )
)
const encodeClaims = Schema.encodeSync(ClaimsCodec)
const decodeClaims = Schema.decodeUnknownOption(ClaimsCodec)

/** Whom a relaying node vouches for: the owner it authorized, and where the request came from. */
export interface Vouched {
  readonly owner: Owner
  readonly origin: RequestOrigin
}

/** The one request a hop token opens, as the receiving node sees it. */
export interface HopRequest {
  readonly method: string
  /** The path and query. */
  readonly url: string
}

/**
 * The internal hop between nodes: a connection or request (CDP, the live
 * view, PTYs, commands, files, the gateway) that lands on a node other than
 * the session's is relayed to the owner's `/internal/...` route, carrying a
 * short-lived token this node signs with the cluster's shared key. The
 * relaying node has already authenticated the user and checked their access
 * to the session; the token says so for that one session and purpose (and
 * for whom), for one request (its method and path) to one node, once:
 * whoever copies it off the wire opens nothing with it.
 */
export class NodeHop extends Context.Service<
  NodeHop,
  {
    /** The WebSocket URL and headers that reach `path` on the node at `nodeUrl` for `sessionId` (a GET). */
    readonly target: (
      nodeUrl: string,
      path: string,
      sessionId: string,
      purpose: string,
      vouched?: Vouched
    ) => Effect.Effect<{ readonly url: string; readonly headers: Record<string, string> }>
    /** The HTTP URL and headers that reach `path` on the node at `nodeUrl` for `sessionId` with `method`. */
    readonly request: (
      nodeUrl: string,
      method: string,
      path: string,
      sessionId: string,
      purpose: string,
      vouched?: Vouched
    ) => Effect.Effect<{ readonly url: string; readonly headers: Record<string, string> }>
    /**
     * Whether `token` was signed by a node of this cluster for this node, session, purpose and
     * request, is still valid and was never used before; using it here uses it up.
     */
    readonly verify: (
      token: string | undefined,
      sessionId: string,
      purpose: string,
      request: HopRequest
    ) => Effect.Effect<boolean>
    /** `verify`, giving whom the relaying node vouched for (if it named anyone). */
    readonly open: (
      token: string | undefined,
      sessionId: string,
      purpose: string,
      request: HopRequest
    ) => Effect.Effect<Option.Option<{ readonly vouched: Option.Option<Vouched> }>>
  }
>()("rbs/cluster/NodeHop") {
  static readonly layer = Layer.effect(
    NodeHop,
    Effect.gen(function* () {
      const config = yield* NodeConfig
      const tokens = signer(Redacted.value((yield* Secrets).nodeTokenKey))

      /** The nonces of tokens used here, with when each expires: a second use is refused. */
      const used = new Map<string, number>()
      let sweptAt = 0
      const useUp = (nonce: string, expires: number, now: number) => {
        if (now - sweptAt > HOP_TOKEN_TTL_MS) {
          for (const [seen, until] of used) if (until <= now) used.delete(seen)
          sweptAt = now
        }
        if (used.has(nonce)) return false
        used.set(nonce, expires)
        return true
      }

      const request = (
        nodeUrl: string,
        method: string,
        path: string,
        sessionId: string,
        purpose: string,
        vouched?: Vouched
      ) =>
        Effect.map(Clock.currentTimeMillis, (now) => ({
          url: `${nodeUrl}${path}`,
          headers: {
            [HOP_HEADER]: tokens.sign(
              encodeClaims({
                sid: sessionId,
                pur: purpose,
                exp: now + HOP_TOKEN_TTL_MS,
                from: config.nodeId,
                to: nodeUrl,
                m: method.toUpperCase(),
                p: path,
                n: Crypto.randomBytes(16).toString("base64url"),
                ...(vouched === undefined
                  ? {}
                  : { own: vouched.owner, ip: vouched.origin.ip, ua: vouched.origin.userAgent })
              })
            )
          }
        }))

      const target = (nodeUrl: string, path: string, sessionId: string, purpose: string, vouched?: Vouched) =>
        Effect.map(request(nodeUrl, "GET", path, sessionId, purpose, vouched), (hop) => ({
          ...hop,
          url: hop.url.replace(/^http(s?):\/\//, "ws$1://")
        }))

      const open = (token: string | undefined, sessionId: string, purpose: string, request: HopRequest) =>
        Effect.map(Clock.currentTimeMillis, (now) =>
          token === undefined
            ? Option.none()
            : tokens.open(token).pipe(
                Option.flatMap(decodeClaims),
                Option.filter(
                  (claims) =>
                    claims.sid === sessionId &&
                    claims.pur === purpose &&
                    claims.exp > now &&
                    claims.to === config.nodeUrl &&
                    claims.m === request.method.toUpperCase() &&
                    claims.p === request.url &&
                    // Last: only a token good in every other way is used up.
                    useUp(claims.n, claims.exp, now)
                ),
                Option.map((claims) => ({
                  vouched: Option.fromNullishOr(claims.own).pipe(
                    Option.map((owner): Vouched => ({
                      owner,
                      origin: { ip: claims.ip ?? null, userAgent: claims.ua ?? null }
                    }))
                  )
                }))
              )
        )

      const verify = (token: string | undefined, sessionId: string, purpose: string, request: HopRequest) =>
        Effect.map(open(token, sessionId, purpose, request), Option.isSome)

      return NodeHop.of({ target, request, verify, open })
    })
  )
}
