import { Effect, Layer } from "effect"
import { Accounts } from "../accounts/Accounts.ts"
import { ServiceAccounts } from "../accounts/ServiceAccounts.ts"
import { ServiceConfig } from "../Config.ts"
import { AccessTokens } from "./AccessTokens.ts"
import { ApiKeys } from "./ApiKeys.ts"
import { KeyCache } from "./KeyCache.ts"
import { OidcLogin } from "./OidcLogin.ts"
import { Secrets } from "./Secrets.ts"
import { Users } from "./Users.ts"

// Part of the composition root (src/App.ts): named layers, no business logic.

/** Access tokens signed with the service's secret, and the configured login providers. */
const TokensLive = Layer.unwrap(
  Effect.gen(function* () {
    const config = yield* ServiceConfig
    const secrets = yield* Secrets
    return Layer.mergeAll(
      AccessTokens.layer({ key: secrets.accessTokenKey, issuer: config.publicUrl }),
      OidcLogin.layer({ providers: config.oidcProviders, publicUrl: config.publicUrl })
    )
  })
)

/** People, keys and accounts: who a request is and what it may do. */
export const IdentityLive = Layer.mergeAll(
  Users.layerNoDeps,
  ApiKeys.layerNoDeps,
  Accounts.layerNoDeps,
  ServiceAccounts.layerNoDeps,
  TokensLive
).pipe(Layer.provideMerge(KeyCache.layer))
