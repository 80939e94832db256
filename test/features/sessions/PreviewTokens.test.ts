import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { Secrets } from "../../../src/platform/crypto/Secrets.ts"
import { ServiceConfig, type ServiceConfigInput } from "../../../src/platform/config/Config.ts"
import { PreviewTokens } from "../../../src/features/sessions/PreviewTokens.ts"
import * as TestService from "../../support/TestService.ts"

const tokensIn = (dataDir: string, config: Omit<ServiceConfigInput, "dataDir"> = {}) =>
  Effect.gen(function* () {
    return yield* PreviewTokens
  }).pipe(
    Effect.provide(
      PreviewTokens.layer.pipe(
        Layer.provide(Secrets.layer),
        Layer.provide(ServiceConfig.layer({ dataDir, ...config }))
      )
    )
  )

const SHARED_KEY = "a-shared-secret-of-forty-characters-0123"

describe("PreviewTokens", () => {
  it.live("verifies what it signed until it expires, and nothing tampered with", () =>
    Effect.gen(function* () {
      const dataDir = yield* TestService.freshDataDir
      const tokens = yield* tokensIn(dataDir)
      const now = new Date("2026-11-23T10:00:00Z")
      const claims = {
        sessionId: "sess_x",
        accountId: "acc",
        expiresAt: new Date("2026-11-23T10:10:00Z"),
        inputEnabled: true
      }
      const token = tokens.sign(claims)
      assert.match(token, /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/)
      assert.deepStrictEqual(tokens.verify(token, now), Option.some(claims))
      assert.isTrue(Option.isNone(tokens.verify(token, new Date("2026-11-23T10:10:00Z"))), "expired")
      const [payload, signature] = token.split(".")
      const forged = Buffer.from(
        JSON.stringify({ sid: "sess_y", acc: "acc", exp: 9e15, inp: true })
      ).toString("base64url")
      for (const bad of [`${forged}.${signature}`, `${payload}.${"A".repeat(43)}`, payload!, "", "a.b.c"]) {
        assert.isTrue(Option.isNone(tokens.verify(bad, now)), bad)
      }
      // The key lives in the data dir: another instance on it verifies; one on another dir does not.
      const again = yield* tokensIn(dataDir)
      assert.isTrue(Option.isSome(again.verify(token, now)))
      const otherDir = yield* TestService.freshDataDir
      const stranger = yield* tokensIn(otherDir)
      assert.isTrue(Option.isNone(stranger.verify(token, now)))
      const mode = (yield* Effect.promise(() => Fs.stat(Path.join(dataDir, "secrets.json")))).mode & 0o777
      assert.strictEqual(mode, 0o600)
    }).pipe(Effect.scoped)
  )

  it.live("nodes given the same SECRETS_KEY verify each other's tokens, with no secrets file", () =>
    Effect.gen(function* () {
      const [first, second, third] = [
        yield* TestService.freshDataDir,
        yield* TestService.freshDataDir,
        yield* TestService.freshDataDir
      ]
      const now = new Date("2026-11-23T10:00:00Z")
      const claims = {
        sessionId: "sess_x",
        accountId: "acc",
        expiresAt: new Date("2026-11-23T10:10:00Z"),
        inputEnabled: true
      }
      const token = (yield* tokensIn(first!, { secretsKey: SHARED_KEY })).sign(claims)
      const peer = yield* tokensIn(second!, { secretsKey: SHARED_KEY, runnerAddress: "127.0.0.1:7001" })
      assert.deepStrictEqual(peer.verify(token, now), Option.some(claims))
      const other = yield* tokensIn(third!, { secretsKey: `${SHARED_KEY}x` })
      assert.isTrue(Option.isNone(other.verify(token, now)), "another key does not verify it")
      assert.isFalse(
        yield* Effect.promise(() =>
          Fs.access(Path.join(first!, "secrets.json")).then(
            () => true,
            () => false
          )
        )
      )
    }).pipe(Effect.scoped)
  )

  it.live("a node of several needs SECRETS_KEY, and a short one is refused", () =>
    Effect.gen(function* () {
      const dataDir = yield* TestService.freshDataDir
      const missing = yield* Effect.exit(tokensIn(dataDir, { runnerAddress: "127.0.0.1:7001" }))
      assert.include(
        String(missing._tag === "Failure" ? missing.cause : ""),
        "SECRETS_KEY is required with RUNNER_ADDRESS"
      )
      const short = yield* Effect.exit(tokensIn(dataDir, { secretsKey: "too-short" }))
      assert.include(
        String(short._tag === "Failure" ? short.cause : ""),
        "SECRETS_KEY must be at least 32 characters"
      )
      assert.notInclude(String(short._tag === "Failure" ? short.cause : ""), "too-short")
    }).pipe(Effect.scoped)
  )

  it.live("refuses to start on a corrupt secrets.json, saying which file", () =>
    Effect.gen(function* () {
      const dataDir = yield* TestService.freshDataDir
      yield* Effect.promise(() => Fs.writeFile(Path.join(dataDir, "secrets.json"), '{"previewTokenKey": 5}'))
      const exit = yield* Effect.exit(tokensIn(dataDir))
      assert.isTrue(exit._tag === "Failure")
      assert.include(String(exit._tag === "Failure" ? exit.cause : ""), "is not a valid secrets file")
    }).pipe(Effect.scoped)
  )
})
