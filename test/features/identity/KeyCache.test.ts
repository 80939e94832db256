import { assert, layer } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import { SqlClient } from "effect/sql"
import { KeyCache } from "../../../src/features/identity/KeyCache.ts"
import { signUp } from "../../support/Client.ts"
import { settle, until } from "../../support/Poll.ts"
import * as TestService from "../../support/TestService.ts"

layer(TestService.layer({ browserPoolSize: 0 }), { excludeTestServices: true })("kept keys", (it) => {
  /** A read that counts how often it ran. */
  const counted = () => {
    let reads = 0
    return { read: Effect.sync(() => ++reads), reads: () => reads }
  }
  const always = () => true

  it.effect("a key is read once for a run of requests; what may not be kept is read each time", () =>
    Effect.gen(function* () {
      const cache = yield* KeyCache
      const key = counted()
      for (let i = 0; i < 5; i++) yield* cache.through("run", key.read, always)
      assert.strictEqual(key.reads(), 1)
      // Refusals (here: anything `keep` declines) are never kept.
      const refused = counted()
      for (let i = 0; i < 3; i++) yield* cache.through("refused", refused.read, () => false)
      assert.strictEqual(refused.reads(), 3)
    })
  )

  it.effect("a NOTIFY on rbs_auth, as another node's change sends, clears what every node keeps", () =>
    Effect.gen(function* () {
      const cache = yield* KeyCache
      const sql = yield* SqlClient.SqlClient
      const key = counted()
      yield* cache.through("notified", key.read, always)
      yield* sql`SELECT pg_notify('rbs_auth', '')`
      yield* until(
        Effect.map(cache.through("notified", key.read, always), () => key.reads()),
        (reads) => reads === 2,
        2_000
      )
    })
  )

  it.effect("the triggers notify for what changes a key's authority, not for its last use", () =>
    Effect.gen(function* () {
      const cache = yield* KeyCache
      const sql = yield* SqlClient.SqlClient
      const { keyId } = yield* Effect.flatMap(TestService.TestService, (service) => signUp(service.baseUrl))
      const key = counted()
      yield* cache.through("trigger", key.read, always)
      // The batched `last_used_at` write: nothing cleared (a notification would arrive within ms).
      yield* sql`UPDATE api_keys SET last_used_at = now() WHERE id = ${keyId}`
      yield* settle(300)
      yield* cache.through("trigger", key.read, always)
      assert.strictEqual(key.reads(), 1)
      for (const change of [
        sql`UPDATE api_keys SET scopes = scopes WHERE id = ${keyId}`,
        sql`UPDATE account_members SET role = role WHERE user_id = (SELECT created_by FROM api_keys WHERE id = ${keyId})`,
        sql`UPDATE service_accounts SET role = role WHERE false`
      ]) {
        const before = key.reads()
        yield* change
        yield* until(
          Effect.map(cache.through("trigger", key.read, always), () => key.reads()),
          (reads) => reads === before + 1,
          2_000
        )
      }
    })
  )

  it.effect("a read that was under way when the cache was cleared is not kept", () =>
    Effect.gen(function* () {
      const cache = yield* KeyCache
      const gate = yield* Deferred.make<void>()
      let reads = 0
      const slow = Effect.map(Deferred.await(gate), () => ++reads)
      const first = yield* Effect.forkChild(cache.through("raced", slow, always))
      yield* settle(50)
      // A revocation commits while the old row is being read.
      yield* cache.clear
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(first)
      yield* cache.through("raced", slow, always)
      assert.strictEqual(reads, 2, "the raced read's answer was not served again")
    })
  )
})
