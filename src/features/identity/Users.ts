import { Clock, Context, Data, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { AccountsRepo } from "./AccountsRepo.ts"
import { Audit } from "../audit/Audit.ts"
import { InvalidCredentials, InvalidField, RateLimited } from "../../kernel/Errors.ts"
import type { User } from "../../kernel/Identity.ts"
import type { Owner } from "../../kernel/Owner.ts"
import { RateLimits } from "../limits/RateLimits.ts"
import { type HashersBusy, HashWorkers, QUEUED_PER_WORKER } from "../../platform/crypto/HashWorkers.ts"
import { AccountHooks } from "./AccountHooks.ts"
import * as Passwords from "./Passwords.ts"
import * as Tokens from "./Tokens.ts"
import { type UserRecord, UsersRepo } from "./UsersRepo.ts"
import { isUuid } from "../../kernel/Ids.ts"
import * as Sql from "../../platform/db/Sql.ts"
import { ServiceConfig } from "../../platform/config/Config.ts"

export const MIN_PASSWORD_LENGTH = 10
export const MAX_PASSWORD_LENGTH = 1024
export const WEB_SESSION_DAYS = 30

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/

const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

export const validEmail = (email: string) => email.length <= 254 && EMAIL.test(email)

/**
 * The email is registered already. Not an answer of the interface: `POST /auth/register` answers
 * it as it answers a new user, so a sign-up tells nobody which emails have an account.
 */
export class EmailTaken extends Data.TaggedError("EmailTaken")<{ readonly email: string }> {}

/** Where a registration comes from: a client address over HTTP, which its limits are spent for. */
export interface RegistrationOrigin {
  readonly ip: string | null
}

/** A new user as a provider describes them (OpenID Connect). */
export interface ExternalIdentity {
  readonly provider: string
  readonly subject: string
  readonly email: string | null
  readonly emailVerified: boolean
  readonly name: string | null
}

/**
 * People: registration (rate limited per client address and overall, the
 * same answer for a registered email), password login (rate limited per
 * client address, per email from an address and per email overall, the same
 * answer and time for unknown emails), dashboard sessions, "log out
 * everywhere", and users who come through a login provider. Every password
 * hash runs on the hash workers: a full queue is 429 `rate_limited`.
 */
export class Users extends Context.Service<
  Users,
  {
    /**
     * A new user. `from`: a client's request, rate limited per its address and for everyone
     * together before the password is hashed; without it, the host itself, not limited.
     */
    readonly register: (
      input: {
        readonly email: string
        readonly password: string
      },
      from?: RegistrationOrigin
    ) => Effect.Effect<User, InvalidField | EmailTaken | RateLimited>
    /** Checks the password and opens a dashboard session; the token goes in the cookie. */
    readonly login: (
      input: { readonly email: string; readonly password: string },
      ip: string | null
    ) => Effect.Effect<{ readonly user: User; readonly token: string }, InvalidCredentials | RateLimited>
    /** Opens a dashboard session for a user who proved who they are some other way. */
    readonly openSession: (user: User) => Effect.Effect<string>
    readonly logout: (token: string) => Effect.Effect<void>
    /** Every dashboard session of the user ends and their access tokens stop working. */
    /** Ends every dashboard session and access token of the user; audited in `owner`'s account. */
    readonly logoutEverywhere: (owner: Owner, userId: string) => Effect.Effect<void>
    readonly userForSessionToken: (token: string) => Effect.Effect<Option.Option<User>>
    readonly findById: (id: string) => Effect.Effect<Option.Option<UserRecord>>
    readonly findByEmail: (email: string) => Effect.Effect<Option.Option<User>>
    /**
     * The user of a provider identity: the one linked before, else the user
     * with the same verified email (linked now), else a new user.
     */
    readonly fromIdentity: (identity: ExternalIdentity) => Effect.Effect<User, InvalidField>
  }
>()("rbs/auth/Users") {
  static readonly layerNoDeps = Layer.effect(
    Users,
    Effect.gen(function* () {
      const repo = yield* UsersRepo
      const sql = yield* SqlClient.SqlClient
      const accountHooks = yield* AccountHooks
      const limits = yield* RateLimits
      const audit = yield* Audit
      const accountsRepo = yield* AccountsRepo
      const { passwordScryptN, passwordHashWorkers } = yield* ServiceConfig
      const hashWorkers = yield* HashWorkers

      /** The user, their personal account and what features add to a new account: all or nothing. */
      const createUser = (input: {
        readonly email: string
        readonly name: string | null
        readonly passwordHash: string | null
        readonly identity?: ExternalIdentity
      }) =>
        Effect.gen(function* () {
          const accountId = Crypto.randomUUID()
          const createdAt = yield* now
          return yield* sql
            .withTransaction(
              Effect.gen(function* () {
                const user = yield* repo.insertUser({
                  id: Crypto.randomUUID(),
                  accountId,
                  ...input,
                  now: createdAt
                })
                if (Option.isNone(user)) return user
                if (input.identity !== undefined) {
                  yield* repo.insertIdentity({
                    provider: input.identity.provider,
                    subject: input.identity.subject,
                    userId: user.value.id,
                    email: input.identity.email,
                    now: createdAt
                  })
                }
                for (const hook of accountHooks.created) yield* hook({ id: accountId, createdAt })
                yield* audit.record(
                  {
                    accountId,
                    role: "owner",
                    principal: { _tag: "User", userId: user.value.id, via: "cookie", tokenAccountId: null }
                  },
                  {
                    action: "user.registered",
                    targetType: "user",
                    targetId: user.value.id,
                    details: input.identity === undefined ? {} : { provider: input.identity.provider }
                  }
                )
                return user
              })
            )
            .pipe(Sql.orDefect)
        })

      /** The hash workers are all busy and their queue full: refused as a rate limit, retried in a second. */
      const busy = (_: HashersBusy) =>
        limits.refuseBusy("password_hash", QUEUED_PER_WORKER * passwordHashWorkers, 1)

      /** A password's hash or check, on this service's hash workers. */
      const hashing = <A>(effect: Effect.Effect<A, HashersBusy, HashWorkers>) =>
        effect.pipe(Effect.provideService(HashWorkers, hashWorkers), Effect.catch(busy))

      const register = Effect.fn("Users.register")(function* (
        input: {
          readonly email: string
          readonly password: string
        },
        from?: RegistrationOrigin
      ) {
        const email = input.email.trim()
        if (!validEmail(email)) return yield* new InvalidField({ field: "email" })
        if (input.password.length < MIN_PASSWORD_LENGTH || input.password.length > MAX_PASSWORD_LENGTH) {
          return yield* new InvalidField({ field: "password" })
        }
        if (from !== undefined) {
          // The address's budget first: one address spends none of everyone's.
          yield* limits.consume("register_ip", from.ip ?? "unknown")
          yield* limits.consume("register_all", "all")
        }
        const passwordHash = yield* hashing(Passwords.hash(input.password, passwordScryptN))
        const user = yield* createUser({ email, name: null, passwordHash })
        if (Option.isNone(user)) return yield* new EmailTaken({ email })
        yield* Effect.logInfo("user.registered", { userId: user.value.id })
        return user.value
      })

      const openSession = Effect.fn("Users.openSession")(function* (user: User) {
        const token = Tokens.newSessionToken()
        const at = yield* now
        yield* repo.insertWebSession({
          tokenHash: Tokens.sha256(token),
          userId: user.id,
          now: at,
          expiresAt: new Date(at.getTime() + WEB_SESSION_DAYS * 86_400_000)
        })
        return token
      })

      /** A password login, kept in the user's personal account's audit trail. */
      const recordLogin = (userId: string, outcome: "success" | "failure") =>
        Effect.flatMap(accountsRepo.personalAccountId(userId), (accountId) =>
          audit.record(
            {
              accountId,
              role: "owner",
              principal: { _tag: "User", userId, via: "cookie", tokenAccountId: null }
            },
            {
              action: "user.logged_in",
              targetType: "user",
              targetId: userId,
              outcome,
              details:
                outcome === "success"
                  ? { method: "password" }
                  : { method: "password", code: "invalid_credentials" }
            }
          )
        )

      const login = Effect.fn("Users.login")(function* (
        input: { readonly email: string; readonly password: string },
        ip: string | null
      ) {
        const email = input.email.trim().toLowerCase()
        const address = ip ?? "unknown"
        // Every budget is spent before any check, so guessing costs the same for every email. The
        // address's first, then the email's from that address, then the email's from everywhere:
        // one address spends none of another's, and cannot use up an email's budget alone.
        yield* limits.consume("login_ip", address)
        yield* limits.consume("login_email", `${email} ${address}`)
        yield* limits.consume("login_account", email)
        const found = yield* repo.findByEmail(email)
        if (Option.isNone(found) || found.value.passwordHash === null) {
          yield* hashing(Passwords.dummyVerify(input.password, passwordScryptN))
          return yield* new InvalidCredentials()
        }
        const user = found.value.user
        const ok = yield* hashing(Passwords.verify(input.password, found.value.passwordHash))
        if (!ok) {
          yield* Effect.logInfo("user.login_failed", { userId: user.id })
          // Off the answer's path, so a known email takes no longer to refuse than an unknown one.
          yield* Effect.forkDetach(recordLogin(user.id, "failure"))
          return yield* new InvalidCredentials()
        }
        const token = yield* openSession(user)
        yield* recordLogin(user.id, "success")
        return { user, token }
      })

      const fromIdentity = Effect.fn("Users.fromIdentity")(function* (identity: ExternalIdentity) {
        const linked = yield* repo.findByIdentity(identity.provider, identity.subject)
        if (Option.isSome(linked)) return linked.value.user
        // Only a verified email may claim an existing user or a new one.
        const email = identity.email?.trim() ?? ""
        if (!identity.emailVerified || !validEmail(email)) return yield* new InvalidField({ field: "email" })
        const existing = yield* repo.findByEmail(email)
        if (Option.isSome(existing)) {
          yield* repo.insertIdentity({
            provider: identity.provider,
            subject: identity.subject,
            userId: existing.value.user.id,
            email,
            now: yield* now
          })
          yield* Effect.logInfo("user.identity_linked", {
            userId: existing.value.user.id,
            provider: identity.provider
          })
          return existing.value.user
        }
        const created = yield* createUser({ email, name: identity.name, passwordHash: null, identity })
        if (Option.isSome(created)) return created.value
        // Registered concurrently with the same email: that registration wins, unlinked.
        return yield* new InvalidField({ field: "email" })
      })

      return Users.of({
        register,
        login,
        openSession,
        logout: (token) => repo.deleteWebSession(Tokens.sha256(token)),
        logoutEverywhere: (owner, userId) =>
          Effect.flatMap(now, (at) =>
            sql
              .withTransaction(
                Effect.andThen(
                  repo.endAllSessions(userId, at),
                  audit.record(owner, {
                    action: "user.logged_out_everywhere",
                    targetType: "user",
                    targetId: userId
                  })
                )
              )
              .pipe(Sql.orDefect)
          ),
        userForSessionToken: (token) =>
          token === ""
            ? Effect.succeed(Option.none<User>())
            : Effect.flatMap(now, (at) => repo.findBySessionToken(Tokens.sha256(token), at)),
        findById: (id) => (isUuid(id) ? repo.findById(id) : Effect.succeed(Option.none())),
        findByEmail: (email) =>
          Effect.map(
            repo.findByEmail(email.trim()),
            Option.map((record) => record.user)
          ),
        fromIdentity
      })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(UsersRepo.layer))
}
