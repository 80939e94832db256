import { Redacted, Schema } from "effect"
import { InvalidField } from "../../kernel/Errors.ts"
import { PROXY_SCHEMES, ProxyFailureReason, type SessionProxyRequest } from "../../kernel/Session.ts"
import * as Sealed from "../../platform/crypto/Sealed.ts"
import type { EgressRegion } from "../../platform/net/Regions.ts"

// A caller's own upstream proxy (`proxy` at create): kept on the session's row with its
// credentials sealed, and turned into the upstream its metering proxy chains to when it starts.

/** The row's `proxy`: what GET shows, and the credentials sealed (`Sealed`, the secrets key's). */
export const StoredProxy = Schema.Struct({
  server: Schema.String,
  bypass: Schema.Array(Schema.String),
  credentials: Schema.NullOr(Schema.String)
})
export type StoredProxy = typeof StoredProxy.Type

/** The region name a session with a proxy of its own shows as `proxy_region`. */
export const OWN_PROXY_REGION = "custom"

/**
 * `server` as the service keeps it (`scheme://host:port`), or `undefined` when it is not one: another
 * scheme, no host or port, or anything beyond them (a path, a query, credentials in the URL, which
 * belong in `username` and `password`, where they are sealed).
 */
export const normalizeServer = (server: string): string | undefined => {
  let url: URL
  try {
    url = new URL(server)
  } catch {
    return undefined
  }
  const scheme = url.protocol.slice(0, -1)
  if (!(PROXY_SCHEMES as ReadonlyArray<string>).includes(scheme)) return undefined
  if (url.hostname === "" || url.port === "" || url.username !== "" || url.password !== "") return undefined
  if ((url.pathname !== "" && url.pathname !== "/") || url.search !== "" || url.hash !== "") return undefined
  return `${scheme}://${url.host}`
}

/** The request's proxy as the row keeps it; a `server` that is not one is 400 `invalid_field` `proxy`. */
export const toStored = (key: Uint8Array, request: SessionProxyRequest): StoredProxy | InvalidField => {
  const server = normalizeServer(request.server)
  if (server === undefined) return new InvalidField({ field: "proxy" })
  // Basic authentication cannot carry a user name with a colon: refused here, not at the first request.
  if (request.username?.includes(":") === true) return new InvalidField({ field: "proxy" })
  const credentials =
    request.username === undefined && request.password === undefined
      ? null
      : Sealed.encrypt(
          key,
          JSON.stringify({ username: request.username ?? "", password: request.password ?? "" })
        )
  return { server, bypass: request.bypass ?? [], credentials }
}

/** What GET shows of it: never the credentials. */
/** The upstream's last failure as its row keeps it (`proxy_error`). */
export const StoredProxyError = Schema.Struct({
  reason: ProxyFailureReason,
  status: Schema.Number,
  at: Schema.String,
  failures: Schema.Number
})
export type StoredProxyError = typeof StoredProxyError.Type

export const toView = (stored: StoredProxy | null, error: StoredProxyError | null = null) =>
  stored === null ? null : { server: stored.server, bypass: stored.bypass, last_error: error }

/** The upstream the session's metering proxy chains to, its credentials opened (held redacted). */
export const toRegion = (key: Uint8Array, stored: StoredProxy): EgressRegion => {
  const url = new URL(stored.server)
  if (stored.credentials !== null) {
    const { username, password } = JSON.parse(Sealed.decrypt(key, stored.credentials)) as {
      readonly username: string
      readonly password: string
    }
    url.username = encodeURIComponent(username)
    url.password = encodeURIComponent(password)
  }
  return {
    name: OWN_PROXY_REGION,
    kind: "upstream",
    url: Redacted.make(url.toString().replace(/\/$/, "")),
    publicAddress: url.hostname.replace(/^\[(.*)\]$/, "$1"),
    guarded: true,
    bypass: stored.bypass
  }
}
