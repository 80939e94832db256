import { Clock, Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import type { AccountInfo, ApiKey, CreatedApiKey, Principal, User } from "../domain/Identity.ts"
import { EmailTaken, InvalidCredentials, InvalidField } from "../domain/Errors.ts"
import { isUuid } from "../domain/Ids.ts"
import { AccountHooks } from "./AccountHooks.ts"
import { IdentityRepo } from "./IdentityRepo.ts"
import * as Passwords from "./Passwords.ts"
import * as Tokens from "./Tokens.ts"

export const MIN_PASSWORD_LENGTH = 10
export const MAX_PASSWORD_LENGTH = 1024
export const WEB_SESSION_DAYS = 30

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/

const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

/**
 * Users, dashboard logins and API keys: the identity every route relies on.
 * Organizations, scopes, rotation and OAuth extend this service later.
 */
export class Identity extends Context.Service<
  Identity,
  {
    readonly register: (input: {
      readonly email: string
      readonly password: string
    }) => Effect.Effect<User, InvalidField | EmailTaken>
    /** Checks the password and opens a dashboard session; the token goes in the cookie. */
    readonly login: (input: {
      readonly email: string
      readonly password: string
    }) => Effect.Effect<{ readonly user: User; readonly token: string }, InvalidCredentials>
    readonly logout: (token: string) => Effect.Effect<void>
    readonly userForSessionToken: (token: string) => Effect.Effect<Option.Option<User>>
    readonly accounts: (user: User) => Effect.Effect<ReadonlyArray<AccountInfo>>
    readonly personalAccountId: (user: User) => Effect.Effect<string>
    /** An account by id (`rbs billing credit --account <id>`). */
    readonly accountExists: (accountId: string) => Effect.Effect<boolean>
    /** The user and account of an email (`rbs billing credit --account <email>`). */
    readonly findByEmail: (
      email: string
    ) => Effect.Effect<Option.Option<{ readonly user: User; readonly accountId: string }>>
    readonly createKey: (
      user: User,
      input: { readonly name: string }
    ) => Effect.Effect<CreatedApiKey, InvalidField>
    readonly listKeys: (user: User) => Effect.Effect<ReadonlyArray<ApiKey>>
    /** The principal of an active key, `None` for a missing, unknown or revoked one. */
    readonly authenticateKey: (secret: string) => Effect.Effect<Option.Option<Principal>>
  }
>()("rbs/auth/Identity") {
  static readonly layerNoDeps = Layer.effect(
    Identity,
    Effect.gen(function* () {
      const repo = yield* IdentityRepo
      const sql = yield* SqlClient.SqlClient
      const accountHooks = yield* AccountHooks

      const register = Effect.fn("Identity.register")(function* (input: {
        readonly email: string
        readonly password: string
      }) {
        const email = input.email.trim()
        if (email.length > 254 || !EMAIL.test(email)) return yield* new InvalidField({ field: "email" })
        if (input.password.length < MIN_PASSWORD_LENGTH || input.password.length > MAX_PASSWORD_LENGTH) {
          return yield* new InvalidField({ field: "password" })
        }
        const passwordHash = yield* Passwords.hash(input.password)
        const accountId = Crypto.randomUUID()
        const createdAt = yield* now
        // The user, their personal account and what features add to a new account: all or nothing.
        const user = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const user = yield* repo.insertUser({
                id: Crypto.randomUUID(),
                accountId,
                email,
                passwordHash,
                now: createdAt
              })
              if (Option.isSome(user)) {
                for (const hook of accountHooks.created) yield* hook({ id: accountId, createdAt })
              }
              return user
            })
          )
          .pipe(Effect.orDie)
        if (Option.isNone(user)) return yield* new EmailTaken()
        yield* Effect.logInfo("user.registered", { userId: user.value.id })
        return user.value
      })

      const login = Effect.fn("Identity.login")(function* (input: {
        readonly email: string
        readonly password: string
      }) {
        const found = yield* repo.findUserByEmail(input.email.trim())
        if (Option.isNone(found)) {
          yield* Passwords.dummyVerify(input.password)
          return yield* new InvalidCredentials()
        }
        const ok = yield* Passwords.verify(input.password, found.value.passwordHash)
        if (!ok) return yield* new InvalidCredentials()
        const token = Tokens.newSessionToken()
        const at = yield* now
        yield* repo.insertWebSession({
          tokenHash: Tokens.sha256(token),
          userId: found.value.id,
          now: at,
          expiresAt: new Date(at.getTime() + WEB_SESSION_DAYS * 86_400_000)
        })
        const user: User = {
          id: found.value.id,
          email: found.value.email,
          created_at: found.value.created_at
        }
        return { user, token }
      })

      const logout = (token: string) => repo.deleteWebSession(Tokens.sha256(token))

      const userForSessionToken = (token: string) =>
        token === ""
          ? Effect.succeed(Option.none<User>())
          : Effect.flatMap(now, (at) => repo.findUserBySessionToken(Tokens.sha256(token), at))

      const createKey = Effect.fn("Identity.createKey")(function* (
        user: User,
        input: { readonly name: string }
      ) {
        const name = input.name.trim()
        if (name.length === 0 || name.length > 100) return yield* new InvalidField({ field: "name" })
        const secret = Tokens.newApiKey("live")
        const key = yield* repo.insertApiKey({
          id: Crypto.randomUUID(),
          accountId: yield* repo.personalAccountId(user.id),
          userId: user.id,
          name,
          prefix: Tokens.displayPrefix(secret),
          secretHash: Tokens.sha256(secret),
          now: yield* now
        })
        yield* Effect.logInfo("api_key.created", { keyId: key.id, userId: user.id })
        return { ...key, secret }
      })

      const listKeys = (user: User) => Effect.flatMap(repo.personalAccountId(user.id), repo.listApiKeys)

      const authenticateKey = (secret: string) =>
        Tokens.looksLikeApiKey(secret)
          ? Effect.flatMap(now, (at) => repo.useApiKey(Tokens.sha256(secret), at)).pipe(
              Effect.map(
                Option.map((record): Principal => ({
                  accountId: record.accountId,
                  apiKeyId: record.key.id,
                  userId: record.userId
                }))
              )
            )
          : Effect.succeed(Option.none<Principal>())

      return Identity.of({
        register,
        login,
        logout,
        userForSessionToken,
        accounts: (user) => repo.listAccounts(user.id),
        personalAccountId: (user) => repo.personalAccountId(user.id),
        accountExists: (accountId) =>
          isUuid(accountId) ? repo.accountExists(accountId) : Effect.succeed(false),
        findByEmail: (email) =>
          Effect.flatMap(repo.findUserByEmail(email.trim()), (found) =>
            Option.match(found, {
              onNone: () => Effect.succeed(Option.none()),
              onSome: (user) =>
                Effect.map(repo.personalAccountId(user.id), (accountId) =>
                  Option.some({
                    user: { id: user.id, email: user.email, created_at: user.created_at },
                    accountId
                  })
                )
            })
          ),
        createKey,
        listKeys,
        authenticateKey
      })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(IdentityRepo.layer))
}
