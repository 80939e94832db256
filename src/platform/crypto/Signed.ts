import { Option } from "effect"
import * as Crypto from "node:crypto"

/**
 * Stateless signed tokens, `payload.base64url(HMAC-SHA256(payload))`: any
 * node holding the key checks one. The payload is the caller's (base64url
 * text); `open` gives it back only if this key signed it.
 */
export const signer = (key: Uint8Array) => {
  const mac = (payload: string) => Crypto.createHmac("sha256", key).update(payload).digest("base64url")
  return {
    sign: (payload: string) => `${payload}.${mac(payload)}`,
    open: (token: string): Option.Option<string> => {
      const [payload, signature, ...rest] = token.split(".")
      if (payload === undefined || signature === undefined || rest.length > 0) return Option.none()
      const expected = Buffer.from(mac(payload))
      const given = Buffer.from(signature)
      return expected.length === given.length && Crypto.timingSafeEqual(expected, given)
        ? Option.some(payload)
        : Option.none()
    }
  }
}
