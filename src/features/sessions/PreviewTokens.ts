import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import { Secrets } from "../../platform/crypto/Secrets.ts"
import { signer } from "../../platform/crypto/Signed.ts"

export interface PreviewClaims {
  readonly sessionId: string
  /** The account the session belongs to: the stream checks the session is still its. */
  readonly accountId: string
  readonly expiresAt: Date
  readonly inputEnabled: boolean
}

/** The signed payload: base64url of `{ sid, acc, exp, inp }`. */
const ClaimsCodec = Schema.StringFromBase64Url.pipe(
  Schema.decodeTo(
    Schema.fromJsonString(
      Schema.Struct({ sid: Schema.String, acc: Schema.String, exp: Schema.Finite, inp: Schema.Boolean })
    )
  )
)
const encodeClaims = Schema.encodeSync(ClaimsCodec)
const decodeClaims = Schema.decodeUnknownOption(ClaimsCodec)

/**
 * Signed, expiring live-view tokens: `base64url(claims).base64url(HMAC-SHA256)`.
 * Stateless, so any node holding the key can check one.
 */
export class PreviewTokens extends Context.Service<
  PreviewTokens,
  {
    readonly sign: (claims: PreviewClaims) => string
    readonly verify: (token: string, now: Date) => Option.Option<PreviewClaims>
  }
>()("rbs/sessions/PreviewTokens") {
  static readonly layer = Layer.effect(
    PreviewTokens,
    Effect.gen(function* () {
      const tokens = signer(Redacted.value((yield* Secrets).previewTokenKey))

      const sign = (claims: PreviewClaims) =>
        tokens.sign(
          encodeClaims({
            sid: claims.sessionId,
            acc: claims.accountId,
            exp: claims.expiresAt.getTime(),
            inp: claims.inputEnabled
          })
        )

      const verify = (token: string, now: Date): Option.Option<PreviewClaims> =>
        tokens.open(token).pipe(
          Option.flatMap(decodeClaims),
          Option.filter((claims) => claims.exp > now.getTime()),
          Option.map((claims) => ({
            sessionId: claims.sid,
            accountId: claims.acc,
            expiresAt: new Date(claims.exp),
            inputEnabled: claims.inp
          }))
        )

      return PreviewTokens.of({ sign, verify })
    })
  )
}
