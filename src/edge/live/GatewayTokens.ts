import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import { Secrets } from "../../platform/crypto/Secrets.ts"
import { signer } from "../../platform/crypto/Signed.ts"

/** The query parameter of a signed gateway link, and the cookie it becomes. */
export const LINK_PARAM = "rbs_token"
export const LINK_COOKIE = "rbs_gateway"

export interface GatewayClaims {
  readonly sessionId: string
  /** The session's account: the gateway checks the session is still its. */
  readonly accountId: string
  readonly expiresAt: Date
  /** Whether it may write (any method, WebSockets): its minter held `sessions.write`; else GET and HEAD. */
  readonly write: boolean
}

/** `{ gw, sid, acc, exp, w? }`: `gw` keeps a gateway link apart from every other token; `w` lets it write. */
const ClaimsCodec = Schema.StringFromBase64Url.pipe(
  Schema.decodeTo(
    Schema.fromJsonString(
      Schema.Struct({
        gw: Schema.Literal(1),
        sid: Schema.String,
        acc: Schema.String,
        exp: Schema.Finite,
        w: Schema.optionalKey(Schema.Literal(1))
      })
    )
  )
)
const encodeClaims = Schema.encodeSync(ClaimsCodec)
const decodeClaims = Schema.decodeUnknownOption(ClaimsCodec)

/**
 * Signed, expiring links to a sandbox's gateway (`?rbs_token=`), for a
 * browser that has no key to send: whoever holds one reaches the session's
 * ports until it expires, as a preview token opens its live view. Stateless:
 * any node checks one.
 */
export class GatewayTokens extends Context.Service<
  GatewayTokens,
  {
    readonly sign: (claims: GatewayClaims) => string
    readonly verify: (token: string, now: Date) => Option.Option<GatewayClaims>
  }
>()("rbs/sandbox/GatewayTokens") {
  static readonly layer = Layer.effect(
    GatewayTokens,
    Effect.gen(function* () {
      const tokens = signer(Redacted.value((yield* Secrets).gatewayTokenKey))
      return GatewayTokens.of({
        sign: (claims) =>
          tokens.sign(
            encodeClaims({
              gw: 1,
              sid: claims.sessionId,
              acc: claims.accountId,
              exp: claims.expiresAt.getTime(),
              ...(claims.write ? { w: 1 as const } : {})
            })
          ),
        verify: (token, now) =>
          tokens.open(token).pipe(
            Option.flatMap(decodeClaims),
            Option.filter((claims) => claims.exp > now.getTime()),
            Option.map((claims) => ({
              sessionId: claims.sid,
              accountId: claims.acc,
              expiresAt: new Date(claims.exp),
              write: claims.w === 1
            }))
          )
      })
    })
  )
}
