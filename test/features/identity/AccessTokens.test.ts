import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Redacted } from "effect"
import { TestClock } from "effect/testing"
import * as Jose from "jose"
import * as Crypto from "node:crypto"
import { AccessTokens, looksLikeJwt } from "../../../src/features/identity/AccessTokens.ts"

const issuer = "https://rbs.example"
const key = Crypto.randomBytes(32)
const subject = { userId: "user-1", accountId: "account-1" }
const start = Date.parse("2030-01-01T00:00:00Z")

const provideTokens = (options: { readonly key?: Uint8Array; readonly issuer?: string } = {}) =>
  Effect.provide(
    AccessTokens.layer({ key: Redacted.make(options.key ?? key), issuer: options.issuer ?? issuer })
  )

const mint = (options?: Parameters<typeof provideTokens>[0]) =>
  AccessTokens.use((tokens) => tokens.mint(subject)).pipe(provideTokens(options))

const verify = (token: string, options?: Parameters<typeof provideTokens>[0]) =>
  AccessTokens.use((tokens) => tokens.verify(token)).pipe(provideTokens(options))

/** A token with the header and claims `mint` writes, signed with `key`, except for `overrides`. */
const forge = (overrides: {
  readonly header?: Partial<Jose.JWTHeaderParameters>
  readonly claims?: Readonly<Record<string, unknown>>
}) =>
  Effect.promise(() => {
    const now = Math.floor(start / 1000)
    return new Jose.SignJWT({
      sub: subject.userId,
      account_id: subject.accountId,
      iss: issuer,
      aud: "rbs-api",
      iat: now,
      exp: now + 900,
      jti: Crypto.randomUUID(),
      ...overrides.claims
    })
      .setProtectedHeader({ alg: "HS256", typ: "at+jwt", ...overrides.header })
      .sign(key)
  })

const base64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url")

describe("AccessTokens", () => {
  it.effect("mints a token that verifies to its user and account, with the documented claims", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(start)
      const minted = yield* mint()
      assert.strictEqual(minted.expiresAt.getTime(), start + 15 * 60 * 1000)
      assert.isTrue(looksLikeJwt(minted.token))

      assert.deepStrictEqual(Jose.decodeProtectedHeader(minted.token), { alg: "HS256", typ: "at+jwt" })
      const claims = Jose.decodeJwt(minted.token)
      assert.deepStrictEqual(
        { ...claims, jti: typeof claims.jti },
        {
          sub: "user-1",
          account_id: "account-1",
          iss: issuer,
          aud: "rbs-api",
          iat: start / 1000,
          exp: start / 1000 + 900,
          jti: "string"
        }
      )
      assert.notStrictEqual(Jose.decodeJwt((yield* mint()).token).jti, claims.jti, "jti is unique")

      assert.deepStrictEqual(
        yield* verify(minted.token),
        Option.some({
          userId: "user-1",
          accountId: "account-1",
          issuedAt: new Date(start),
          expiresAt: new Date(start + 15 * 60 * 1000)
        })
      )
    })
  )

  it.effect("stops verifying when 15 minutes have passed", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(start)
      const { token } = yield* mint()
      yield* TestClock.adjust("14 minutes")
      yield* TestClock.adjust("59 seconds")
      assert.isTrue(Option.isSome(yield* verify(token)))
      yield* TestClock.adjust("1 second")
      assert.isTrue(Option.isNone(yield* verify(token)))
    })
  )

  it.effect("rejects a token whose payload was changed after signing", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(start)
      const { token } = yield* mint()
      const [header, payload, signature] = token.split(".")
      const claims = JSON.parse(Buffer.from(payload!, "base64url").toString())
      const tampered = `${header}.${base64url({ ...claims, account_id: "account-2" })}.${signature}`
      assert.isTrue(looksLikeJwt(tampered))
      assert.isTrue(Option.isNone(yield* verify(tampered)))
    })
  )

  it.effect("rejects a token signed with another key, or verified with another issuer", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(start)
      const other = yield* mint({ key: Crypto.randomBytes(32) })
      assert.isTrue(Option.isNone(yield* verify(other.token)))
      const elsewhere = yield* mint({ issuer: "https://other.example" })
      assert.isTrue(Option.isNone(yield* verify(elsewhere.token)))
      // The control for the forged tokens below: with nothing changed, it verifies.
      assert.isTrue(Option.isSome(yield* verify(yield* forge({}))))
    })
  )

  it.effect("rejects alg none and algorithms other than HS256", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(start)
      const { token } = yield* mint()
      const payload = token.split(".")[1]
      for (const alg of ["none", "None", "HS512"]) {
        const header = base64url({ alg, typ: "at+jwt" })
        assert.isTrue(Option.isNone(yield* verify(`${header}.${payload}.`)), alg)
        assert.isTrue(Option.isNone(yield* verify(`${header}.${payload}.${token.split(".")[2]}`)), alg)
      }
      const hs512 = yield* forge({ header: { alg: "HS512" } })
      assert.isTrue(Option.isNone(yield* verify(hs512)))
    })
  )

  it.effect("rejects a wrong audience, issuer or type, and missing claims", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(start)
      const forged = {
        audience: yield* forge({ claims: { aud: "other-api" } }),
        issuer: yield* forge({ claims: { iss: "https://other.example" } }),
        type: yield* forge({ header: { typ: "JWT" } }),
        "no account": yield* forge({ claims: { account_id: undefined } }),
        "empty account": yield* forge({ claims: { account_id: "" } }),
        "no jti": yield* forge({ claims: { jti: undefined } }),
        "from the future": yield* forge({ claims: { nbf: Math.floor(start / 1000) + 60 } })
      }
      for (const [label, token] of Object.entries(forged)) {
        assert.isTrue(Option.isNone(yield* verify(token)), label)
      }
    })
  )

  it.effect("answers None for values that are not JWTs", () =>
    Effect.gen(function* () {
      for (const value of ["", "svc_live_abc", "a.b", "a.b.c.d", "a..c", "a.b.c"]) {
        assert.isTrue(Option.isNone(yield* verify(value)), value)
      }
    })
  )

  it("tells JWT-shaped values from API keys", () => {
    assert.isTrue(looksLikeJwt("eyJh.eyJz.c2ln"))
    assert.isTrue(looksLikeJwt("a-b_c.d.e"))
    for (const value of ["", "svc_live_abcdef", "a.b", "a.b.", ".b.c", "a.b.c.d", "a.b+/.c", "a.b.c=="]) {
      assert.isFalse(looksLikeJwt(value), value)
    }
  })

  it.effect("refuses a key shorter than 32 bytes", () =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(mint({ key: Crypto.randomBytes(16) }))
      assert.isTrue(exit._tag === "Failure")
    })
  )
})
