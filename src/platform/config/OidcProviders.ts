import { ConfigProvider, Effect, Redacted, Result, Schema } from "effect"

// The login providers' configuration: what OidcLogin is built from, read from
// `OIDC_<NAME>_*` through the configuration provider by Config.ts.

/** One OpenID Connect provider users can log in with, at `/auth/<name>/login`. */
export interface OidcProviderConfig {
  /** Lowercase `[a-z0-9-]+`. */
  readonly name: string
  readonly issuer: string
  readonly clientId: string
  readonly clientSecret: Redacted.Redacted<string>
}

export class OidcConfigError extends Schema.TaggedError<OidcConfigError>()("OidcConfigError", {
  message: Schema.String
}) {}

export const PROVIDER_NAME = /^[a-z0-9-]+$/

const LOOPBACK_HOSTS = new Set(["127.0.0.1", "[::1]", "localhost"])

export const isLoopback = (url: URL) => LOOPBACK_HOSTS.has(url.hostname)

const ENV_KEY = /^OIDC_([A-Z0-9_]+)_(ISSUER|CLIENT_ID|CLIENT_SECRET)$/

/**
 * The providers configured in the environment: `OIDC_<NAME>_ISSUER`,
 * `OIDC_<NAME>_CLIENT_ID` and `OIDC_<NAME>_CLIENT_SECRET` for each, where
 * `<NAME>` (`A-Z`, `0-9`, `_`) becomes the provider name in lowercase with
 * `_` as `-`. Empty values count as missing. Errors name variables, never values
 * of secrets.
 */
export const parseOidcProviders = (
  env: Readonly<Record<string, string | undefined>>
): Result.Result<ReadonlyArray<OidcProviderConfig>, OidcConfigError> => {
  const present = (key: string) => {
    const value = env[key]
    return value === undefined || value.trim() === "" ? undefined : value.trim()
  }
  const names = new Set<string>()
  for (const key of Object.keys(env)) {
    const match = ENV_KEY.exec(key)
    if (match !== null && present(key) !== undefined) names.add(match[1]!)
  }
  const providers: Array<OidcProviderConfig> = []
  for (const NAME of [...names].sort()) {
    const variable = (suffix: string) => `OIDC_${NAME}_${suffix}`
    const issuer = present(variable("ISSUER"))
    const clientId = present(variable("CLIENT_ID"))
    const clientSecret = present(variable("CLIENT_SECRET"))
    if (issuer === undefined || clientId === undefined || clientSecret === undefined) {
      const missing = ["ISSUER", "CLIENT_ID", "CLIENT_SECRET"]
        .map(variable)
        .filter((key) => present(key) === undefined)
      return Result.fail(
        new OidcConfigError({ message: `OIDC provider ${NAME} is incomplete: set ${missing.join(" and ")}` })
      )
    }
    const url = URL.parse(issuer)
    const secure =
      url !== null && (url.protocol === "https:" || (url.protocol === "http:" && isLoopback(url)))
    if (url === null || !secure || url.search !== "" || url.hash !== "") {
      return Result.fail(
        new OidcConfigError({
          message: `${variable("ISSUER")} must be an https URL without query or fragment (http only on loopback), got "${issuer}"`
        })
      )
    }
    providers.push({
      name: NAME.toLowerCase().replaceAll("_", "-"),
      issuer,
      clientId,
      clientSecret: Redacted.make(clientSecret)
    })
  }
  return Result.succeed(providers)
}

/**
 * The `OIDC_*` variables the current `ConfigProvider` holds, by their full
 * names: the environment by default, or what a library host provides (a
 * `ConfigProvider.fromUnknown({...})` with the same names). Their names are
 * open-ended, so they are found by walking the provider's tree under `OIDC`
 * (the environment's names split at `_`, each leaf joined back).
 */
export const oidcVariables = Effect.gen(function* () {
  const provider = yield* ConfigProvider.ConfigProvider
  const found: Record<string, string> = {}
  const walk = (path: ReadonlyArray<string | number>): Effect.Effect<void, ConfigProvider.SourceError> =>
    Effect.gen(function* () {
      const node = yield* provider.load(path)
      if (node === undefined) return
      if (node.value !== undefined) found[path.join("_")] = node.value
      if (node._tag === "Record") for (const key of node.keys) yield* walk([...path, key])
      if (node._tag === "Array")
        for (let index = 0; index < node.length; index++) yield* walk([...path, index])
    })
  const root = yield* provider.load([])
  if (root?._tag === "Record") {
    for (const key of root.keys) if (key === "OIDC" || key.startsWith("OIDC_")) yield* walk([key])
  }
  return found
})
