import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import * as Crypto from "node:crypto"
import { Secrets } from "../auth/Secrets.ts"

export const PREVIEW_TOKEN_TTL_MS = 10 * 60 * 1000

export interface PreviewClaims {
  readonly sessionId: string
  readonly expiresAt: Date
  readonly inputEnabled: boolean
}

/** The signed payload: base64url of `{ sid, exp, inp }`. */
const ClaimsCodec = Schema.StringFromBase64Url.pipe(
  Schema.decodeTo(
    Schema.fromJsonString(Schema.Struct({ sid: Schema.String, exp: Schema.Finite, inp: Schema.Boolean }))
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
      const key = Redacted.value((yield* Secrets).previewTokenKey)
      const mac = (payload: string) => Crypto.createHmac("sha256", key).update(payload).digest("base64url")

      const sign = (claims: PreviewClaims) => {
        const payload = encodeClaims({
          sid: claims.sessionId,
          exp: claims.expiresAt.getTime(),
          inp: claims.inputEnabled
        })
        return `${payload}.${mac(payload)}`
      }

      const verify = (token: string, now: Date): Option.Option<PreviewClaims> => {
        const [payload, signature] = token.split(".")
        if (payload === undefined || signature === undefined) return Option.none()
        const expected = Buffer.from(mac(payload))
        const given = Buffer.from(signature)
        if (expected.length !== given.length || !Crypto.timingSafeEqual(expected, given)) return Option.none()
        return decodeClaims(payload).pipe(
          Option.filter((claims) => claims.exp > now.getTime()),
          Option.map((claims) => ({
            sessionId: claims.sid,
            expiresAt: new Date(claims.exp),
            inputEnabled: claims.inp
          }))
        )
      }

      return PreviewTokens.of({ sign, verify })
    })
  )
}
