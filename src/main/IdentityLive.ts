import { Effect, Layer } from "effect"
import { Accounts } from "../features/identity/Accounts.ts"
import { ServiceAccounts } from "../features/identity/ServiceAccounts.ts"
import { ServiceConfig } from "../platform/config/Config.ts"
import { AccessTokens } from "../features/identity/AccessTokens.ts"
import { ApiKeys } from "../features/identity/ApiKeys.ts"
import { KeyCache } from "../features/identity/KeyCache.ts"
import { OidcLogin } from "../features/identity/OidcLogin.ts"
import { Secrets } from "../platform/crypto/Secrets.ts"
import { Users } from "../features/identity/Users.ts"
import { HashWorkers } from "../platform/crypto/HashWorkers.ts"

// Part of the composition root (src/main/App.ts): named layers, no business logic.

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
).pipe(Layer.provideMerge(Layer.mergeAll(KeyCache.layer, HashWorkers.layer)))
