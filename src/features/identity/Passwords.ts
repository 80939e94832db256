import { Effect } from "effect"
import * as Crypto from "node:crypto"

// scrypt at OWASP's recommended parameters (N=2^17, r=8, p=1). Stored as
// `scrypt$N$r$p$salt$hash` so parameters can be raised without breaking old hashes.
const N = 2 ** 17
const r = 8
const p = 1
const keyLength = 32
const maxmem = 256 * 1024 * 1024

const derive = (password: string, salt: Buffer, n: number, r: number, p: number) =>
  Effect.callback<Buffer>((resume) => {
    Crypto.scrypt(password.normalize("NFKC"), salt, keyLength, { N: n, r, p, maxmem }, (error, key) => {
      if (error) resume(Effect.die(error))
      else resume(Effect.succeed(key))
    })
  })

export const hash = Effect.fn("Passwords.hash")(function* (password: string) {
  const salt = Crypto.randomBytes(16)
  const key = yield* derive(password, salt, N, r, p)
  return `scrypt$${N}$${r}$${p}$${salt.toString("base64url")}$${key.toString("base64url")}`
})

export const verify = Effect.fn("Passwords.verify")(function* (password: string, stored: string) {
  const [scheme, n, rr, pp, salt, expected] = stored.split("$")
  if (scheme !== "scrypt" || salt === undefined || expected === undefined) return false
  const key = yield* derive(password, Buffer.from(salt, "base64url"), Number(n), Number(rr), Number(pp))
  const expectedKey = Buffer.from(expected, "base64url")
  return expectedKey.length === key.length && Crypto.timingSafeEqual(expectedKey, key)
})

/** Burns the same time as a real check, so unknown emails can't be told apart by timing. */
export const dummyVerify = (password: string) =>
  verify(password, `scrypt$${N}$${r}$${p}$${"A".repeat(22)}$${"A".repeat(43)}`).pipe(Effect.asVoid)
