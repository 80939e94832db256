import * as Crypto from "node:crypto"

// Standard Webhooks (https://www.standardwebhooks.com): the secret, the
// signature header, and the secret's encryption at rest.

const PREFIX = "whsec_"

/** A new signing secret: `whsec_` + base64 of 24 random bytes. */
export const newSecret = () => `${PREFIX}${Crypto.randomBytes(24).toString("base64")}`

/** What reads show of a secret: its prefix and first four characters. */
export const preview = (secret: string) => `${secret.slice(0, PREFIX.length + 4)}...`

const keyOf = (secret: string) => Buffer.from(secret.slice(PREFIX.length), "base64")

/** One `v1,<base64 HMAC-SHA256 of id.timestamp.body>` entry. */
export const signature = (secret: string, id: string, timestamp: number, body: string) =>
  `v1,${Crypto.createHmac("sha256", keyOf(secret)).update(`${id}.${timestamp}.${body}`).digest("base64")}`

/**
 * The three headers of a delivery. Every secret in `secrets` signs (a rotated
 * secret beside its successor), space-separated as the specification allows.
 */
export const headers = (secrets: ReadonlyArray<string>, id: string, timestamp: number, body: string) => ({
  "webhook-id": id,
  "webhook-timestamp": String(timestamp),
  "webhook-signature": secrets.map((secret) => signature(secret, id, timestamp, body)).join(" ")
})

/**
 * The retry schedule: the wait before each attempt (the first at once), then
 * `failed`. Each wait after the first is spread by +-10% (jitter), so the
 * retries of many deliveries that failed together do not arrive together.
 */
export const RETRY_SCHEDULE_MS = [
  0,
  5_000,
  5 * 60_000,
  30 * 60_000,
  2 * 3_600_000,
  5 * 3_600_000,
  10 * 3_600_000,
  10 * 3_600_000
] as const

/** The wait before attempt `number` (1-based) of a series; undefined past the last. */
export const retryDelay = (number: number, random: () => number = Math.random): number | undefined => {
  const base = RETRY_SCHEDULE_MS[number - 1]
  if (base === undefined) return undefined
  return base === 0 ? 0 : Math.round(base * (0.9 + 0.2 * random()))
}
