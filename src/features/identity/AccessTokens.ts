import { Clock, Context, Duration, Effect, Layer, Option, Redacted, Schema } from "effect"
import * as Jose from "jose"
import * as Crypto from "node:crypto"

export const ACCESS_TOKEN_TTL = Duration.minutes(15)
export const ACCESS_TOKEN_AUDIENCE = "rbs-api"
/** RFC 9068's media type for JWT access tokens: another JWT signed with the same key is not one. */
const TOKEN_TYPE = "at+jwt"
const ALGORITHM = "HS256"

export interface AccessTokenSubject {
  readonly userId: string
  readonly accountId: string
}

export interface MintedAccessToken {
  readonly token: string
  readonly expiresAt: Date
}

export interface AccessTokenClaims extends AccessTokenSubject {
  /** Whole seconds, as in the token's `iat`. */
  readonly issuedAt: Date
  readonly expiresAt: Date
}

// `account_id` rather than `act`: RFC 8693 defines `act` (the acting party) as an object.
const Claims = Schema.Struct({
  sub: Schema.NonEmptyString,
  account_id: Schema.NonEmptyString,
  iat: Schema.Number,
  exp: Schema.Number
})
const decodeClaims = Schema.decodeUnknownOption(Claims)

const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/

/** Three non-empty base64url segments: a bearer value to verify as an access token, not look up as a key. */
export const looksLikeJwt = (token: string) => JWT_SHAPE.test(token)

/**
 * Short-lived access tokens: HS256 JWTs naming a user and the account they act
 * in, valid for 15 minutes. Verification needs no database; a token cannot be
 * revoked before it expires, which is why it lives briefly.
 */
export class AccessTokens extends Context.Service<
  AccessTokens,
  {
    readonly mint: (subject: AccessTokenSubject) => Effect.Effect<MintedAccessToken>
    /** The token's subject while it is valid; `None` for anything else, whatever the reason. */
    readonly verify: (token: string) => Effect.Effect<Option.Option<AccessTokenClaims>>
  }
>()("rbs/auth/AccessTokens") {
  /** `key`: at least 32 bytes; `issuer`: the service's public URL. */
  static readonly layer = (options: {
    readonly key: Redacted.Redacted<Uint8Array>
    readonly issuer: string
  }) => Layer.effect(AccessTokens, make(options))
}

export const make = Effect.fnUntraced(function* (options: {
  readonly key: Redacted.Redacted<Uint8Array>
  readonly issuer: string
}) {
  const key = Redacted.value(options.key)
  if (key.byteLength < 32) {
    return yield* Effect.die(new Error("the access token key must have at least 32 bytes"))
  }
  const ttlSeconds = Duration.toSeconds(ACCESS_TOKEN_TTL)

  const mint = Effect.fn("AccessTokens.mint")(function* (subject: AccessTokenSubject) {
    const issuedAt = Math.floor((yield* Clock.currentTimeMillis) / 1000)
    const expiresAt = issuedAt + ttlSeconds
    const token = yield* Effect.promise(() =>
      new Jose.SignJWT({ account_id: subject.accountId })
        .setProtectedHeader({ alg: ALGORITHM, typ: TOKEN_TYPE })
        .setSubject(subject.userId)
        .setIssuer(options.issuer)
        .setAudience(ACCESS_TOKEN_AUDIENCE)
        .setIssuedAt(issuedAt)
        .setExpirationTime(expiresAt)
        .setJti(Crypto.randomUUID())
        .sign(key)
    )
    return { token, expiresAt: new Date(expiresAt * 1000) }
  })

  const verify = Effect.fn("AccessTokens.verify")(function* (token: string) {
    if (!looksLikeJwt(token)) return Option.none()
    const now = yield* Clock.currentTimeMillis
    const verified = yield* Effect.option(
      Effect.tryPromise(() =>
        Jose.jwtVerify(token, key, {
          algorithms: [ALGORITHM],
          typ: TOKEN_TYPE,
          issuer: options.issuer,
          audience: ACCESS_TOKEN_AUDIENCE,
          requiredClaims: ["sub", "exp", "iat", "jti"],
          currentDate: new Date(now)
        })
      )
    )
    return Option.flatMap(verified, ({ payload }) =>
      Option.map(decodeClaims(payload), (claims) => ({
        userId: claims.sub,
        accountId: claims.account_id,
        issuedAt: new Date(claims.iat * 1000),
        expiresAt: new Date(claims.exp * 1000)
      }))
    )
  })

  return AccessTokens.of({ mint, verify })
})
