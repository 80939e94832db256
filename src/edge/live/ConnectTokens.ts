import { Context, Duration, Effect, Layer, Option, Redacted, Schema } from "effect"
import type { PrincipalRef } from "../guard/Authenticator.ts"
import { Secrets } from "../../platform/crypto/Secrets.ts"
import { signer } from "../../platform/crypto/Signed.ts"

/** How a connect token begins: no key, access token or other token kind does. */
export const CONNECT_TOKEN_PREFIX = "rbs_cdp_"

/** How long one lets its holder connect: as long as an access token lives. */
export const CONNECT_TOKEN_TTL = Duration.minutes(15)

export interface ConnectClaims {
  readonly sessionId: string
  /** The account the caller was acting in when it was minted: the connect acts there again. */
  readonly accountId: string
  /** Who minted it: the connect acts as they stand when it is made (a key revoked since is refused). */
  readonly principal: PrincipalRef
  readonly issuedAt: Date
  readonly expiresAt: Date
}

/** A key by its id alone (`k`); a user (`u`) as they authenticated, by an access token or the cookie. */
const PrincipalCodec = Schema.Union([
  Schema.Struct({ k: Schema.String }),
  Schema.Struct({
    u: Schema.String,
    via: Schema.Literals(["cookie", "token"]),
    t: Schema.NullOr(Schema.String)
  })
])

const refOf = (p: typeof PrincipalCodec.Type): PrincipalRef =>
  "k" in p ? { _tag: "ApiKey", keyId: p.k } : { _tag: "User", userId: p.u, via: p.via, tokenAccountId: p.t }

/** `{ cdp, sid, acc, iat, exp, p }`: `cdp` keeps a connect token apart from every other signed token. */
const ClaimsCodec = Schema.StringFromBase64Url.pipe(
  Schema.decodeTo(
    Schema.fromJsonString(
      Schema.Struct({
        cdp: Schema.Literal(1),
        sid: Schema.String,
        acc: Schema.String,
        iat: Schema.Finite,
        exp: Schema.Finite,
        p: PrincipalCodec
      })
    )
  )
)
const encodeClaims = Schema.encodeSync(ClaimsCodec)
const decodeClaims = Schema.decodeUnknownOption(ClaimsCodec)

/**
 * A session's connect tokens (`rbs_cdp_...`): what DevTools discovery puts
 * in the URLs it answers with, in place of the key a client sent as
 * `?token=`, so that a URL a client prints or logs opens one session's CDP
 * routes for a quarter of an hour and nothing else (no other session, no
 * API route). It names its minter, not what they could do: a key is read
 * again at each use, so a revoke or a change of scopes reaches its tokens
 * at once. Stateless, signed with a key of their own: any node checks one.
 */
export class ConnectTokens extends Context.Service<
  ConnectTokens,
  {
    readonly sign: (claims: ConnectClaims) => string
    /** The claims of a token minted for `sessionId` that has not expired at `now`. */
    readonly verify: (token: string, sessionId: string, now: Date) => Option.Option<ConnectClaims>
  }
>()("rbs/live/ConnectTokens") {
  static readonly layer = Layer.effect(
    ConnectTokens,
    Effect.gen(function* () {
      const tokens = signer(Redacted.value((yield* Secrets).connectTokenKey))
      return ConnectTokens.of({
        sign: (claims) => {
          const principal = claims.principal
          return (
            CONNECT_TOKEN_PREFIX +
            tokens.sign(
              encodeClaims({
                cdp: 1,
                sid: claims.sessionId,
                acc: claims.accountId,
                iat: claims.issuedAt.getTime(),
                exp: claims.expiresAt.getTime(),
                p:
                  principal._tag === "ApiKey"
                    ? { k: principal.keyId }
                    : { u: principal.userId, via: principal.via, t: principal.tokenAccountId }
              })
            )
          )
        },
        verify: (token, sessionId, now) =>
          (token.startsWith(CONNECT_TOKEN_PREFIX)
            ? tokens.open(token.slice(CONNECT_TOKEN_PREFIX.length))
            : Option.none()
          ).pipe(
            Option.flatMap(decodeClaims),
            Option.filter((claims) => claims.sid === sessionId && claims.exp > now.getTime()),
            Option.map((claims) => ({
              sessionId: claims.sid,
              accountId: claims.acc,
              principal: refOf(claims.p),
              issuedAt: new Date(claims.iat),
              expiresAt: new Date(claims.exp)
            }))
          )
      })
    })
  )
}
