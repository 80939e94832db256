import * as Crypto from "node:crypto"

export const API_KEY_PREFIXES = ["svc_live_", "svc_test_"] as const
export type ApiKeyMode = "live" | "test"

/** `svc_live_` + 32 random bytes in base64url. */
export const newApiKey = (mode: ApiKeyMode = "live") =>
  `svc_${mode}_${Crypto.randomBytes(32).toString("base64url")}`

/** The part of a key kept for display: the first 12 characters. */
export const displayPrefix = (key: string) => key.slice(0, 12)

export const looksLikeApiKey = (value: string) => API_KEY_PREFIXES.some((prefix) => value.startsWith(prefix))

export const newSessionToken = () => Crypto.randomBytes(32).toString("base64url")

export const sha256 = (value: string) => Crypto.createHash("sha256").update(value).digest()

/** Compares two secrets in time that does not depend on where they differ. */
export const equalStrings = (a: string, b: string) => Crypto.timingSafeEqual(sha256(a), sha256(b))
