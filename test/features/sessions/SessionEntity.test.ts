import { assert, describe, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Deferred, Effect, Exit, Layer, Redacted, Scope } from "effect"
import {
  MessageStorage,
  RunnerHealth,
  Runners,
  RunnerStorage,
  Sharding,
  ShardingConfig
} from "effect/cluster"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import * as Crypto from "node:crypto"
import { shardGroups } from "../../../src/platform/cluster/ClusterLive.ts"
import { Audit } from "../../../src/features/audit/Audit.ts"
import { ServiceConfig } from "../../../src/platform/config/Config.ts"
import { AuditConfig } from "../../../src/features/audit/AuditConfig.ts"
import * as Migrations from "../../../src/platform/db/Migrations.ts"
import { Secrets } from "../../../src/platform/crypto/Secrets.ts"
import { Egress } from "../../../src/platform/net/Egress.ts"
import { LocalPorts } from "../../../src/platform/net/LocalPorts.ts"
import { LiveSessions } from "../../../src/runtime/LiveSessions.ts"
import { RuntimePools } from "../../../src/runtime/RuntimePools.ts"
import type { SessionRuntime } from "../../../src/runtime/SessionRuntime.ts"
import { Sessions } from "../../../src/features/sessions/Sessions.ts"
import { SessionActors } from "../../../src/features/sessions/SessionActors.ts"
import { layerEntity } from "../../../src/features/sessions/SessionEntity.ts"
import { SessionHooks, SessionLifecycle } from "../../../src/features/sessions/SessionLifecycle.ts"
import { SessionsRepo } from "../../../src/features/sessions/SessionsRepo.ts"
import { SessionKinds } from "../../../src/runtime/SessionKinds.ts"
import { SessionHomes } from "../../../src/runtime/SessionHomes.ts"
import { SessionExtensions } from "../../../src/features/sessions/SessionExtensions.ts"
import { SessionImages } from "../../../src/features/sessions/SessionImages.ts"
import { Recordings } from "../../../src/features/recordings/Recordings.ts"
import { SessionLogs } from "../../../src/features/logs/SessionLogs.ts"
import { browserKind } from "../../../src/runtimes/browser/BrowserKind.ts"
import * as TestService from "../../support/TestService.ts"

/**
 * A pool that hands out a stand-in runtime: the entity's timer logic is the
 * unit under test here, not Chromium (the lifecycle tests cover that with a
 * real one). It records when the session releases what it took.
 */
const fakePools = (released: Deferred.Deferred<void>) =>
  Layer.succeed(
    RuntimePools,
    RuntimePools.fromPools([
      {
        kind: "browser",
        acquire: (spec) =>
          Effect.acquireRelease(
            Effect.gen(function* () {
              const exited = yield* Deferred.make<void>()
              return {
                kind: "browser",
                pid: 0,
                device: "a stand-in",
                egress: {
                  region: spec.region,
                  counters: () => ({ bytesUp: 0, bytesDown: 0 }),
                  proxyIp: () => undefined,
                  upstreamFailure: () => undefined,
                  onRefused: () => () => {},
                  probe: async () => ({ ok: true, detail: "" }),
                  close: Effect.void
                },
                exited,
                crashReason: "browser_crashed",
                serve: Effect.void,
                resize: () => Effect.void,
                frames: {
                  subscribe: () => Effect.void,
                  dispatch: () => Effect.void,
                  subscribers: () => 0,
                  tabs: () => Effect.void,
                  switchTo: () => Effect.void,
                  selection: () => Effect.die("a stand-in has no page")
                },
                screenshot: Effect.die("a stand-in has no screen"),
                drive: () => Effect.die("a stand-in has no page"),
                cdp: {
                  endpoint: "ws://127.0.0.1:1/devtools/browser/fake",
                  relay: () => Effect.die("a stand-in has no browser"),
                  relayPage: () => Effect.die("a stand-in has no browser"),
                  version: Effect.die("a stand-in has no browser"),
                  pages: Effect.die("a stand-in has no browser")
                }
              } satisfies SessionRuntime
            }),
            () => Deferred.succeed(released, undefined)
          ),
        retire: (scope) => Scope.close(scope, Exit.void),
        idle: Effect.succeed(0),
        target: Effect.succeed(0),
        capacity: 1,
        ready: Effect.succeed(true)
      }
    ])
  )

/** Real waiting, outside the test clock: the database answers in real time. */
const settle = (ms = 20) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, ms)))

/** effect/cluster's `TestRunner`, serving this node's own shard group as the service's runner does. */
const TestRunner = Sharding.layer.pipe(
  Layer.provideMerge(Runners.layerNoop),
  Layer.provideMerge(MessageStorage.layerMemory),
  Layer.provide([RunnerStorage.layerMemory, RunnerHealth.layerNoop]),
  Layer.provide(ShardingConfig.layer(shardGroups("local")))
)

describe("SessionEntity", () => {
  const liveLayer = (released: Deferred.Deferred<void>) =>
    Effect.gen(function* () {
      const url = yield* TestService.freshDatabase
      const Database = Migrations.layer().pipe(
        Layer.provideMerge(PgClient.layer({ url: Redacted.make(url), maxConnections: 4 }))
      )
      return Layer.mergeAll(layerEntity, SessionActors.layer).pipe(
        Layer.provideMerge(TestRunner),
        Layer.provideMerge(
          Layer.mergeAll(
            fakePools(released),
            Layer.succeed(SessionKinds, SessionKinds.fromKinds([browserKind])),
            // These sessions are recorded by none, and on no workspace: nothing is mounted.
            Layer.mock(Recordings)({}),
            Layer.mock(SessionLogs)({}),
            // No sandbox call comes: the entity's connections are never asked for.
            Layer.mock(Sessions)({}),
            Layer.succeed(SessionHomes, SessionHomes.of({ mount: () => Effect.die("no workspace here") })),
            Layer.succeed(
              SessionExtensions,
              SessionExtensions.of({
                owned: () => Effect.succeed([]),
                unpacked: () => Effect.die("no extension here")
              })
            ),
            Layer.succeed(
              SessionImages,
              SessionImages.of({ find: () => Effect.succeedNone, local: () => Effect.die("no image here") })
            ),
            LiveSessions.layer,
            Egress.layer,
            Secrets.layer
          )
        ),
        Layer.provideMerge(LocalPorts.layer),
        Layer.provideMerge(SessionLifecycle.layer),
        Layer.provideMerge(SessionHooks.layerNone),
        Layer.provideMerge(Layer.mergeAll(SessionsRepo.layer, Audit.layer)),
        Layer.provideMerge(Database),
        Layer.provideMerge(AuditConfig.layer),
        Layer.provideMerge(
          ServiceConfig.layer({ logLevel: "Error", dataDir: yield* TestService.freshDataDir })
        )
      )
    })

  /** A session row in `creating` made at the epoch (where the test clock starts), and a way to follow it. */
  const sessionRow = (ttlSeconds: number) =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const accountId = Crypto.randomUUID()
      const id = `sess_${Crypto.randomUUID()}`
      yield* sql`INSERT INTO accounts (id, name, kind, created_at) VALUES (${accountId}, 'a', 'personal', to_timestamp(0))`
      yield* sql`
        INSERT INTO sessions (id, account_id, status, profile, device, ttl_seconds, node_id, created_at, expires_at)
        VALUES (${id}, ${accountId}, 'creating', 'default', '', ${ttlSeconds}, 'local', to_timestamp(0), to_timestamp(${ttlSeconds}))`
      const status = Effect.map(
        sql<{
          status: string
          ended_reason: string | null
        }>`SELECT status, ended_reason FROM sessions WHERE id = ${id}`,
        (rows) => `${rows[0]!.status}/${rows[0]!.ended_reason}`
      )
      const until = (wanted: string) =>
        Effect.gen(function* () {
          for (let i = 0; i < 250; i++) {
            if ((yield* status) === wanted) return
            yield* settle()
          }
          assert.fail(`never ${wanted}: ${yield* status}`)
        })
      return { id, status, until }
    })

  it.effect("closes its session with ttl_expired when its own TTL timer fires, on the test clock", () =>
    Effect.gen(function* () {
      const released = yield* Deferred.make<void>()
      yield* Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const actors = yield* SessionActors
        // Created at the epoch with a 60 s TTL.
        const { id, status, until } = yield* sessionRow(60)

        yield* actors.start({ id, nodeId: "local" })
        yield* until("ready/null")

        yield* TestClock.adjust("59 seconds")
        yield* settle(300)
        assert.strictEqual(yield* status, "ready/null", "one second before its TTL the session is open")
        assert.isFalse(yield* Deferred.isDone(released))

        yield* TestClock.adjust("1 second")
        yield* until("closed/ttl_expired")
        yield* Deferred.await(released)
        const [row] = yield* sql<{ ended_at: Date }>`SELECT ended_at FROM sessions WHERE id = ${id}`
        assert.strictEqual(row!.ended_at.getTime(), 60_000, "ended at the TTL, by the test clock")
      }).pipe(Effect.provide(yield* liveLayer(released)))
    }).pipe(Effect.scoped)
  )

  it.effect("holds its actor while the session lives, long past the actor's idle time", () =>
    Effect.gen(function* () {
      const released = yield* Deferred.make<void>()
      yield* Effect.gen(function* () {
        const actors = yield* SessionActors
        const { id, status, until } = yield* sessionRow(3600)
        yield* actors.start({ id, nodeId: "local" })
        yield* until("ready/null")

        // The actor's idle time is a minute; the reaper looks every few seconds of the test clock.
        for (let minute = 0; minute < 5; minute++) {
          yield* TestClock.adjust("1 minute")
          yield* settle(100)
        }
        assert.strictEqual(yield* status, "ready/null", "no relayed traffic for five minutes: still open")
        assert.isFalse(yield* Deferred.isDone(released), "its runtime is still held")

        assert.isTrue(yield* actors.close({ id, nodeId: "local" }, "client_delete"))
        yield* until("closed/client_delete")
        yield* Deferred.await(released)
      }).pipe(Effect.provide(yield* liveLayer(released)))
    }).pipe(Effect.scoped)
  )
})
