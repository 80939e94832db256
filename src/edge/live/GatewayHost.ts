/**
 * The gateway's per-session origins: with `GATEWAY_DOMAIN` set, a port of a
 * sandbox's program is reached at `<port>-<session id>.<domain>` (E2B's form),
 * and its default port at `<session id>.<domain>`, on the scheme and port of
 * `PUBLIC_URL`. Each is an origin of its own, so its pages need no
 * `Content-Security-Policy: sandbox`: the browser keeps their storage,
 * service workers and cookies apart from every other session's and from the
 * service's.
 */
import { isSessionId } from "../../kernel/Ids.ts"

/** The port `<session id>.<domain>` reaches. */
export const GATEWAY_DEFAULT_PORT = 3000

export interface GatewayHost {
  readonly id: string
  readonly port: number
}

/** The session and port a request's `Host` names under `domain`; undefined for any other host. */
export const gatewayHostOf = (
  host: string | undefined,
  domain: string | undefined
): GatewayHost | undefined => {
  if (host === undefined || domain === undefined) return undefined
  const name = host.toLowerCase().replace(/:\d+$/, "").replace(/\.$/, "")
  if (!name.endsWith(`.${domain}`)) return undefined
  const label = name.slice(0, -domain.length - 1)
  const match = /^(?:(\d{1,5})-)?([^.]+)$/.exec(label)
  if (match === null || !isSessionId(match[2])) return undefined
  const port = match[1] === undefined ? GATEWAY_DEFAULT_PORT : Number(match[1])
  if (!Number.isInteger(port) || port < 1 || port > 65_535) return undefined
  return { id: match[2]!, port }
}

/** The origin of a session's port: `PUBLIC_URL`'s scheme and port, `<port>-<id>.<domain>` for its host. */
export const gatewayOrigin = (publicUrl: string, domain: string, id: string, port: number) => {
  const base = new URL(publicUrl)
  return `${base.protocol}//${port}-${id}.${domain}${base.port === "" ? "" : `:${base.port}`}`
}
