import { Effect } from "effect"
import * as Dns from "node:dns/promises"
import * as Net from "node:net"
import type { AddressPolicy, RefusalReason } from "../../platform/net/AddressPolicy.ts"
import { normalizeHost } from "../../platform/net/AddressPolicy.ts"

/** Where a webhook delivery goes: the URL and the one address it was checked at. */
export interface Target {
  readonly url: URL
  readonly address: string
  readonly family: 4 | 6
}

/** Why a URL is not a webhook target. */
export type TargetProblem =
  | { readonly _tag: "Malformed" }
  | { readonly _tag: "PlainHttp"; readonly address: string }
  | { readonly _tag: "Unresolvable"; readonly host: string }
  | { readonly _tag: "Refused"; readonly address: string; readonly reason: RefusalReason }

export const describeProblem = (problem: TargetProblem) => {
  switch (problem._tag) {
    case "Malformed":
      return "not an http(s) URL"
    case "PlainHttp":
      return `http is accepted only for addresses in WEBHOOK_ALLOW_CIDRS (${problem.address} is not)`
    case "Unresolvable":
      return `${problem.host} does not resolve`
    case "Refused":
      return `refused destination: ${problem.address} (${problem.reason})`
  }
}

/**
 * Resolves a webhook URL once and checks every address it resolves to
 * against the SSRF guard; the delivery then connects to the checked address
 * (no second lookup a DNS answer could change in between). https always; http
 * only when the addresses are in `WEBHOOK_ALLOW_CIDRS` (a receiver on the
 * operator's own network, or a test).
 */
export const resolveTarget = (
  raw: string,
  guard: { readonly policy: AddressPolicy; readonly allowed: (address: string) => boolean }
): Effect.Effect<Target, TargetProblem> =>
  Effect.gen(function* () {
    const url = yield* Effect.try({
      try: () => new URL(raw),
      catch: (): TargetProblem => ({ _tag: "Malformed" })
    })
    if ((url.protocol !== "https:" && url.protocol !== "http:") || url.username !== "" || url.password !== "")
      return yield* Effect.fail<TargetProblem>({ _tag: "Malformed" })
    const host = normalizeHost(url.hostname)
    const port = Number(url.port || (url.protocol === "https:" ? 443 : 80))
    const addresses = Net.isIP(host)
      ? [{ address: host, family: Net.isIPv4(host) ? 4 : 6 }]
      : yield* Effect.tryPromise({
          try: () => Dns.lookup(host, { all: true, verbatim: true }),
          catch: (): TargetProblem => ({ _tag: "Unresolvable", host })
        })
    if (addresses.length === 0) return yield* Effect.fail<TargetProblem>({ _tag: "Unresolvable", host })
    for (const { address } of addresses) {
      const reason = guard.policy.refusal(address, port)
      if (reason !== undefined) return yield* Effect.fail<TargetProblem>({ _tag: "Refused", address, reason })
      if (url.protocol === "http:" && !guard.allowed(address))
        return yield* Effect.fail<TargetProblem>({ _tag: "PlainHttp", address })
    }
    const chosen = addresses[0]!
    return { url, address: chosen.address, family: chosen.family === 6 ? 6 : 4 } satisfies Target
  })
