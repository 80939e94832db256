import { assert, describe, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { execFileSync } from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { Audit } from "../../../src/features/audit/Audit.ts"
import { BlobStore } from "../../../src/platform/blobs/BlobStore.ts"
import { ServiceConfig } from "../../../src/platform/config/Config.ts"
import { AuditConfig } from "../../../src/features/audit/AuditConfig.ts"
import { RecordingsConfig } from "../../../src/features/recordings/RecordingsConfig.ts"
import * as Migrations from "../../../src/platform/db/Migrations.ts"
import { concatList } from "../../../src/features/recordings/Encoder.ts"
import { Recordings } from "../../../src/features/recordings/Recordings.ts"
import { RecordingsRepo } from "../../../src/features/recordings/RecordingsRepo.ts"
import { frameFile } from "../../../src/features/recordings/Spool.ts"
import { recordedSessions, SessionsRepo } from "../../../src/features/sessions/SessionsRepo.ts"
import * as TestService from "../../support/TestService.ts"

describe("concatList", () => {
  it("shows each frame until the next came and the last until the recording ended", () => {
    const list = concatList(
      [
        { n: 1, t: 1000 },
        { n: 2, t: 1200 },
        { n: 3, t: 4200 }
      ],
      5200
    )
    assert.strictEqual(
      list.text,
      [
        "ffconcat version 1.0",
        `file '${frameFile(1)}'`,
        "duration 0.200",
        `file '${frameFile(2)}'`,
        "duration 3.000",
        `file '${frameFile(3)}'`,
        "duration 1.000",
        `file '${frameFile(3)}'`,
        ""
      ].join("\n")
    )
    assert.strictEqual(list.durationMs, 4200)
  })

  it("keeps a frame whose clock went backwards on screen a moment, and a lone frame 0.2 s", () => {
    const list = concatList(
      [
        { n: 1, t: 1000 },
        { n: 2, t: 900 }
      ],
      900
    )
    assert.include(list.text, "duration 0.001")
    assert.strictEqual(list.durationMs, 201)
  })
})

describe("recovery", () => {
  it.live("a node encodes the spools a stop left behind, and fails the recordings whose frames it lost", () =>
    Effect.gen(function* () {
      const url = yield* TestService.freshDatabase
      const dataDir = yield* TestService.freshDataDir
      const Data = Layer.mergeAll(
        RecordingsRepo.layer,
        recordedSessions.pipe(Layer.provideMerge(SessionsRepo.layer)),
        BlobStore.layer,
        Audit.layer
      ).pipe(
        Layer.provideMerge(Migrations.layer()),
        Layer.provideMerge(PgClient.layer({ url: Redacted.make(url), maxConnections: 2 })),
        Layer.provideMerge(Layer.mergeAll(AuditConfig.layer, RecordingsConfig.layer)),
        Layer.provideMerge(ServiceConfig.layer({ dataDir, logLevel: "Error" }))
      )
      const accountId = Crypto.randomUUID()
      const spooled = `sess_${Crypto.randomUUID()}`
      const lost = `sess_${Crypto.randomUUID()}`
      // A spool as a node stopped mid-recording leaves it: frames and their index, no end.
      const spool = Path.join(dataDir, "recordings", spooled)
      yield* Effect.promise(() => Fs.mkdir(spool, { recursive: true }))
      execFileSync("ffmpeg", [
        ...["-loglevel", "error", "-f", "lavfi", "-i", "testsrc=size=640x360:rate=1", "-t", "3"],
        Path.join(spool, "%06d.jpg")
      ])
      yield* Effect.promise(() =>
        Fs.writeFile(
          Path.join(spool, "index.jsonl"),
          [1, 2, 3].map((n) => JSON.stringify({ n, t: 1_000_000 + n * 1000 })).join("\n") + "\n"
        )
      )
      const seed = Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* sql`INSERT INTO accounts (id, name, kind, created_at) VALUES (${accountId}, 'a', 'personal', now())`
        for (const [id, status] of [
          [spooled, "processing"],
          [lost, "recording"]
        ] as const) {
          yield* sql`
            INSERT INTO sessions (id, account_id, status, profile, device, ttl_seconds, node_id, created_at, expires_at, ended_at, ended_reason, recording)
            VALUES (${id}, ${accountId}, 'closed', 'default', '', 60, 'local', now(), now(), now(), 'server_restart', true)`
          yield* sql`
            INSERT INTO recordings (session_id, account_id, status, node_id, content_type, created_at)
            VALUES (${id}, ${accountId}, ${status}, 'local', 'video/webm', now())`
        }
      })
      // The rows exist before the node starts, as after a stop.
      yield* Effect.gen(function* () {
        yield* seed
        yield* Effect.gen(function* () {
          const repo = yield* RecordingsRepo
          const deadline = Date.now() + 30_000
          while (true) {
            const [a, b] = [yield* repo.find(spooled), yield* repo.find(lost)]
            const states = [Option.getOrThrow(a).status, Option.getOrThrow(b).status]
            if (states[0] !== "processing" && states[1] !== "recording") break
            assert.isBelow(Date.now(), deadline, `still ${states}`)
            yield* Effect.sleep("100 millis")
          }
          const ready = Option.getOrThrow(yield* repo.find(spooled))
          assert.strictEqual(ready.status, "ready")
          // Three frames a second apart, the last held a second: a crash's spool ends a second after its last frame.
          assert.strictEqual(Number(ready.duration_ms), 3000)
          const failed = Option.getOrThrow(yield* repo.find(lost))
          assert.strictEqual(failed.status, "failed")
          assert.strictEqual(failed.error, "the node lost the recording's frames")
          const stat = yield* (yield* BlobStore).stat(`recordings/${spooled}.webm`)
          assert.isTrue(Option.isSome(stat))
        }).pipe(Effect.provide(Recordings.layerNoDeps))
      }).pipe(Effect.provide(Data))
    }).pipe(Effect.scoped)
  )
})
