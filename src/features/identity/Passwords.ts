import { Effect } from "effect"
import * as Crypto from "node:crypto"
import { isScryptCost } from "../../platform/config/Config.ts"
import { HashWorkers } from "../../platform/crypto/HashWorkers.ts"

// scrypt at OWASP's recommended parameters (N=2^17, r=8, p=1) unless `PASSWORD_SCRYPT_N` says
// otherwise. Stored as `scrypt$N$r$p$salt$hash`, so a hash is checked at the cost it was made with
// and the cost can change without breaking old hashes. Each derivation runs on the hash workers
// (`HashWorkers`), never on the threads DNS lookups and file reads share; a full queue is
// `HashersBusy`.
const r = 8
const p = 1
const keyLength = 32

const derive = (password: string, salt: Buffer, n: number, r: number, p: number) =>
  Effect.flatMap(Effect.service(HashWorkers), (workers) =>
    workers.scrypt({ password: password.normalize("NFKC"), salt, n, r, p, keyLength })
  )

/** A new hash of `password` at cost `n` (`ServiceConfig.passwordScryptN`). */
export const hash = Effect.fn("Passwords.hash")(function* (password: string, n: number) {
  const salt = Crypto.randomBytes(16)
  const key = yield* derive(password, salt, n, r, p)
  return `scrypt$${n}$${r}$${p}$${salt.toString("base64url")}$${key.toString("base64url")}`
})

/** Checks `password` against a stored hash, at the cost it was made with. */
export const verify = Effect.fn("Passwords.verify")(function* (password: string, stored: string) {
  const [scheme, n, rr, pp, salt, expected] = stored.split("$")
  if (scheme !== "scrypt" || salt === undefined || expected === undefined || !isScryptCost(Number(n)))
    return false
  const key = yield* derive(password, Buffer.from(salt, "base64url"), Number(n), Number(rr), Number(pp))
  const expectedKey = Buffer.from(expected, "base64url")
  return expectedKey.length === key.length && Crypto.timingSafeEqual(expectedKey, key)
})

/**
 * Burns the same time as a real check at the cost new hashes are made with, so unknown emails
 * can't be told apart by timing.
 */
export const dummyVerify = (password: string, n: number) =>
  verify(password, `scrypt$${n}$${r}$${p}$${"A".repeat(22)}$${"A".repeat(43)}`).pipe(Effect.asVoid)
