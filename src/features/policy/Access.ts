import { Context, Option } from "effect"
import { HttpApi, type HttpApiGroup, OpenApi } from "effect/http-api"
import { Authorize } from "./AuthMiddleware.ts"
import type { Permission, Principal } from "../../kernel/Owner.ts"

/**
 * Which credentials a route takes:
 * - `any`: an API key, an access token or the dashboard cookie;
 * - `person`: the dashboard cookie or an access token, never a key;
 * - `cookie`: the dashboard cookie alone (top-up, minting credentials);
 * - `cookie-or-scoped-key`: the cookie, or a key created explicitly with the
 *   route's scope (a full-access key may not manage keys, so a leaked one cannot mint more);
 * - `assistant`: an assistant runtime's own token alone (`asrt_...`);
 * - `any-or-assistant`: what `any` takes, or an assistant runtime's token.
 *
 * A runtime's token opens only the last two.
 */
export type Credentials =
  "any" | "person" | "cookie" | "cookie-or-scoped-key" | "assistant" | "any-or-assistant"

/** How the docs name each kind (docs/reference/access.md). */
export const CREDENTIALS_LABEL: Readonly<Record<Credentials, string>> = {
  any: "key, token or cookie",
  person: "person (cookie or token)",
  cookie: "cookie only",
  "cookie-or-scoped-key": "cookie, or a key with the scope",
  assistant: "the assistant runtime's token",
  "any-or-assistant": "key, token, cookie or the runtime's token"
}

/** Whether `principal` is a kind of credential the route takes. */
export const takes = (credentials: Credentials, principal: Principal): boolean => {
  if (principal._tag === "Assistant") return credentials === "assistant" || credentials === "any-or-assistant"
  switch (credentials) {
    case "any":
    case "any-or-assistant":
      return true
    case "assistant":
      return false
    case "person":
      return principal._tag === "User"
    case "cookie":
      return principal._tag === "User" && principal.via === "cookie"
    case "cookie-or-scoped-key":
      return principal._tag === "User"
        ? principal.via === "cookie"
        : principal._tag === "ApiKey" && principal.scopes !== null
  }
}

/**
 * The audit action a mutating route records. The service writes the success
 * in the transaction of the change; `Authorize` writes a refusal or a failed
 * attempt under the same action with outcome `failure`.
 */
export interface Audited {
  /** `<resource>.<verb>`, e.g. `api_key.revoked`. */
  readonly action: string
  readonly targetType: string
  /** The path parameter that names the target, if the path has one. */
  readonly targetParam: string | null
}

export const audits = (action: string, targetType: string, targetParam: string | null = null): Audited => ({
  action,
  targetType,
  targetParam
})

export interface Access {
  /** `null`: any member of the active account. */
  readonly permission: Permission | null
  readonly credentials: Credentials
  /** `null` for a route that changes nothing worth an audit event (reads, a screenshot). */
  readonly audit: Audited | null
}

/** Endpoint annotation read by `Authorize`: what a route requires. */
export class RequiredAccess extends Context.Service<RequiredAccess, Access>()("rbs/auth/RequiredAccess") {}

export const access = (
  permission: Permission | null,
  credentials: Credentials = "any",
  audit: Audited | null = null
): Access => ({ permission, credentials, audit })

/**
 * Endpoint annotations for `.annotateMerge`: the `RequiredAccess` that
 * `Authorize` enforces (and the audit action it records a failure under), the
 * same written into the operation's OpenAPI as `x-required-access` and
 * `x-audit-action`.
 */
export const requires = (
  permission: Permission | null,
  credentials: Credentials = "any",
  audit: Audited | null = null
) =>
  Context.make(RequiredAccess, access(permission, credentials, audit)).pipe(
    Context.add(OpenApi.Transform, (operation: Record<string, any>) => ({
      ...operation,
      "x-required-access": { permission, credentials },
      ...(audit === null ? {} : { "x-audit-action": audit.action })
    }))
  )

export interface RouteAccess {
  readonly method: string
  readonly path: string
  readonly access: Access
}

/** A row of the route table; `access` undefined where an endpoint lacks its annotation. */
export interface RouteRow {
  readonly method: string
  readonly path: string
  readonly access: Access | undefined
}

/**
 * The HttpApi's table: every route behind `Authorize` with what it requires
 * (read from the endpoint annotations; `undefined` where one is missing,
 * which the tests refuse). `edge/http/RawRoutes.ts` adds the raw routes.
 */
export const routeTable = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>
): ReadonlyArray<RouteRow> => {
  const rows: Array<RouteRow> = []
  HttpApi.reflect(api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, middleware, mergedAnnotations }) => {
      if (!(middleware as ReadonlySet<unknown>).has(Authorize)) return
      rows.push({
        method: endpoint.method,
        path: endpoint.path.replace(/:(\w+)/g, "{$1}"),
        access: Option.getOrUndefined(Context.getOption(mergedAnnotations, RequiredAccess))
      })
    }
  })
  return rows
}
