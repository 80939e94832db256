import { Clock, Context, Duration, Effect, Layer, Option, Schedule, type Scope } from "effect"
import * as Sql from "../../platform/db/Sql.ts"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import * as FsSync from "node:fs"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import * as DataDir from "../../platform/files/DataDir.ts"
import { BlobStore } from "../../platform/blobs/BlobStore.ts"
import { NodeConfig, ServiceConfig } from "../../platform/config/Config.ts"
import { Nodes } from "../../platform/cluster/Nodes.ts"
import { SessionsRepo } from "../sessions/SessionsRepo.ts"
import * as WorkspaceDisk from "./WorkspaceDisk.ts"
import type { DiskError } from "./WorkspaceDisk.ts"
import { RuntimeLaunchError } from "../../runtime/SessionRuntime.ts"
import { SessionHomes } from "../../runtime/SessionHomes.ts"
import { snapshotKey } from "./WorkspaceRows.ts"

/** How long a session waits for the session before it on a workspace to give the disk back. */
const TAKE_WAIT = Duration.seconds(60)

/** What a session on a workspace asks of this node's disk. */
export interface WorkspaceMount {
  readonly workspaceId: string
  readonly sessionId: string
  /** Keep the session's changes (the workspace's own dir), or work on a copy dropped at its end. */
  readonly persistence: boolean
}

/** Files a browser leaves in its profile that would make the next launch think it still runs. */
const CHROMIUM_LOCKS = ["SingletonLock", "SingletonSocket", "SingletonCookie"]

/**
 * This node's workspace disks (`DATA_DIR/workspaces`): made on first use
 * (from the workspace's newest snapshot when another node held it before, or
 * empty), lent to sessions, archived and restored by jobs. At start it
 * removes what a stopped process left half-made and the disks of workspaces
 * deleted meanwhile.
 */
export class WorkspaceDisks extends Context.Service<
  WorkspaceDisks,
  {
    readonly disk: WorkspaceDisk.WorkspaceDisk
    /**
     * The dir a session on the workspace runs on, made here if this node had
     * none (and the workspace's `node_id` moved here); measured every
     * `WORKSPACE_MEASURE_SECONDS` while the session runs; given back when the
     * scope closes: its size measured, or the copy of a session without
     * persistence dropped.
     */
    readonly mount: (mount: WorkspaceMount) => Effect.Effect<string, DiskError, Scope.Scope>
    /** Makes the workspace's disk here from its newest snapshot, or empty; its `node_id` set to this node. */
    readonly materialize: (workspaceId: string) => Effect.Effect<void, DiskError>
    /** Measures the disk and writes `used_bytes`. */
    readonly measure: (workspaceId: string) => Effect.Effect<number, DiskError>
    /** Whether this node's copy of the workspace is its disk (recorded here, or nowhere yet). */
    readonly owns: (workspaceId: string) => Effect.Effect<boolean>
    /**
     * Whether the session holding the disk (`mounted_by`) can no longer give it back: its row
     * is gone, or it ran on another node whose heartbeat has stopped.
     */
    readonly holderGone: (sessionId: string) => Effect.Effect<boolean>
    /** A temp file path on this node's disk, removed when the scope closes. */
    readonly tempFile: (name: string) => Effect.Effect<string, never, Scope.Scope>
  }
>()("rbs/workspaces/WorkspaceDisks") {
  static readonly layer = Layer.effect(
    WorkspaceDisks,
    Effect.gen(function* () {
      const config = yield* NodeConfig
      const { workspaceMeasureMs, workspaceDiskBytes } = yield* ServiceConfig
      const sql = yield* SqlClient.SqlClient
      const blobs = yield* BlobStore
      const sessions = yield* SessionsRepo
      const nodes = yield* Nodes
      // Each workspace a file system of its own (its quota), where the machine lets the service make one.
      const unbounded =
        workspaceDiskBytes === 0
          ? undefined
          : process.getuid?.() !== 0
            ? "the service does not run as root"
            : !FsSync.existsSync("/dev/loop-control")
              ? "the machine has no loop devices"
              : !FsSync.existsSync(WorkspaceDisk.MKFS)
                ? `${WorkspaceDisk.MKFS} is missing (Debian: apt-get install e2fsprogs)`
                : undefined
      if (unbounded !== undefined)
        yield* Effect.logWarning("workspace.disks_unbounded", { reason: unbounded })
      const disk = WorkspaceDisk.make(
        Path.join(config.dataDir, "workspaces"),
        workspaceDiskBytes > 0 && unbounded === undefined
          ? { dir: Path.join(config.dataDir, "workspace-disks"), bytes: workspaceDiskBytes }
          : undefined
      )
      const tmpRoot = Path.join(config.dataDir, "tmp", "workspaces")
      yield* Effect.promise(() => Fs.rm(tmpRoot, { recursive: true, force: true }))
      yield* Effect.promise(async () => {
        await DataDir.makePrivate(tmpRoot, config.dataDir)
        // Tenants' files: the workspaces' root is the service's alone (sessions reach a workspace
        // through the mounts root makes for them).
        await DataDir.makePrivate(Path.join(config.dataDir, "workspaces"))
      })

      // What a stopped process left half-made, and disks of workspaces deleted while this node was away.
      yield* disk.recover.pipe(Effect.orDie)
      yield* Effect.addFinalizer(() => disk.detachAll)
      const onDisk = yield* Effect.promise(() => Fs.readdir(disk.root).catch(() => [] as Array<string>))
      if (onDisk.length > 0) {
        const known = yield* sql<{ readonly id: string }>`
          SELECT id::text FROM workspaces WHERE id::text IN ${sql.in(onDisk)}`.pipe(Sql.orDefect)
        const keep = new Set(known.map((row) => row.id))
        for (const id of onDisk) if (!keep.has(id)) yield* disk.remove(id)
      }

      const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))
      // Nothing of this node's runs yet: what the previous process had mounted is free.
      yield* sql`UPDATE workspaces SET mounted_by = NULL WHERE node_id = ${config.nodeId}
        AND mounted_by IS NOT NULL`.pipe(Sql.orDefect)

      const tempFile = (name: string) =>
        Effect.acquireRelease(
          Effect.sync(() => Path.join(tmpRoot, `${Crypto.randomBytes(6).toString("hex")}-${name}`)),
          (file) => Effect.promise(() => Fs.rm(file, { force: true }))
        )

      const measure = (workspaceId: string) =>
        Effect.gen(function* () {
          const bytes = yield* disk.usedBytes(workspaceId)
          yield* sql`UPDATE workspaces SET used_bytes = ${bytes}, updated_at = ${yield* now}
            WHERE id = ${workspaceId}`.pipe(Sql.orDefect)
          return bytes
        })

      /** Whether this node's copy of the workspace is its disk: it is recorded here, or nowhere yet. */
      const owns = (workspaceId: string) =>
        Effect.map(
          sql<{
            readonly node_id: string | null
          }>`SELECT node_id FROM workspaces WHERE id = ${workspaceId}`.pipe(Sql.orDefect),
          (rows) => rows[0] !== undefined && (rows[0].node_id === null || rows[0].node_id === config.nodeId)
        )

      const materialize = (workspaceId: string) =>
        Effect.gen(function* () {
          // A copy left from before the workspace moved to another node is stale: its disk is made anew.
          if ((yield* disk.exists(workspaceId)) && !(yield* owns(workspaceId)))
            yield* disk.remove(workspaceId)
          if (!(yield* disk.exists(workspaceId))) {
            const [newest] = yield* sql<{ readonly id: string }>`
              SELECT id FROM workspace_snapshots WHERE workspace_id = ${workspaceId}
              ORDER BY created_at DESC LIMIT 1`.pipe(Sql.orDefect)
            if (newest === undefined) yield* disk.ensure(workspaceId)
            else
              yield* Effect.scoped(
                Effect.gen(function* () {
                  const file = yield* tempFile("snapshot.tar.zst")
                  yield* blobs.getFile(snapshotKey(workspaceId, newest.id), file)
                  yield* disk.restore(workspaceId, file)
                })
              )
          }
          yield* sql`UPDATE workspaces SET node_id = ${config.nodeId}, updated_at = ${yield* now}
            WHERE id = ${workspaceId} AND node_id IS DISTINCT FROM ${config.nodeId}`.pipe(Sql.orDefect)
        })

      /**
       * Whether the session holding a disk can no longer give it back: its row is gone, or it
       * ran on another node whose heartbeat has stopped. A holder on this node gives the disk
       * back itself, when its runtime ends.
       */
      const holderGone = (holder: string) =>
        Effect.gen(function* () {
          const session = yield* sessions.findById(holder)
          if (Option.isNone(session)) return true
          if (session.value.node_id === config.nodeId) return false
          const seen = (yield* nodes.lastSeen([session.value.node_id])).get(session.value.node_id)
          return (
            seen === undefined ||
            seen.getTime() <= (yield* Clock.currentTimeMillis) - config.clusterTimings.placeableWithinMs
          )
        })

      /**
       * Takes the disk for the session's runtime: once the runtime of the session before has given
       * it back (its browser closed, its sandbox gone: after its row says closed), or at once when
       * that session's node is gone. 60 s at most. The take compares and sets on the holder it
       * looked at, so two sessions never both take it.
       */
      const take = (request: WorkspaceMount) => {
        /** One look at the holder; taken when it is free (or gone). */
        const attempt = Effect.gen(function* () {
          const rows = yield* sql<{ readonly mounted_by: string | null }>`
            SELECT mounted_by FROM workspaces WHERE id = ${request.workspaceId}`.pipe(Sql.orDefect)
          const holder = rows[0]?.mounted_by
          const free =
            holder !== undefined &&
            (holder === null || holder === request.sessionId || (yield* holderGone(holder)))
          if (!free) return false
          // The take and its release together: no interruption between them.
          const taken = yield* Effect.uninterruptible(
            sql`
              UPDATE workspaces SET mounted_by = ${request.sessionId}
              WHERE id = ${request.workspaceId} AND mounted_by IS NOT DISTINCT FROM ${holder}
              RETURNING id`.pipe(
              Sql.orDefect,
              Effect.tap((rows) => (rows.length > 0 ? Effect.addFinalizer(() => give(request)) : Effect.void))
            )
          )
          return taken.length > 0
        })
        return attempt.pipe(
          Effect.repeat({ until: (taken) => taken, schedule: Schedule.spaced("100 millis") }),
          Effect.timeoutOption(TAKE_WAIT),
          Effect.flatMap((taken) =>
            Option.isSome(taken)
              ? Effect.void
              : Effect.fail(
                  new WorkspaceDisk.DiskError({
                    message: "the workspace's previous session did not give its disk back within 60 s"
                  })
                )
          )
        )
      }

      const give = (request: WorkspaceMount) =>
        sql`UPDATE workspaces SET mounted_by = NULL WHERE id = ${request.workspaceId}
          AND mounted_by = ${request.sessionId}`.pipe(Effect.ignore)

      const mount = (request: WorkspaceMount) =>
        Effect.gen(function* () {
          yield* take(request)
          yield* materialize(request.workspaceId)
          const dir = request.persistence
            ? yield* disk.current(request.workspaceId)
            : yield* Effect.acquireRelease(disk.scratch(request.workspaceId, request.sessionId), disk.discard)
          yield* Effect.promise(() =>
            Promise.all(CHROMIUM_LOCKS.map((name) => Fs.rm(Path.join(dir, name), { force: true })))
          )
          if (request.persistence) {
            yield* Effect.addFinalizer(() => measure(request.workspaceId).pipe(Effect.ignore))
            // Live: the account's storage cap counts what the session has written so far.
            yield* measure(request.workspaceId).pipe(
              Effect.ignore,
              Effect.delay(Duration.millis(workspaceMeasureMs)),
              Effect.forever,
              Effect.forkScoped
            )
          }
          return dir
        })

      return WorkspaceDisks.of({ disk, mount, materialize, measure, tempFile, owns, holderGone })
    })
  )

  /** Sessions on a workspace run on its disk, taken for the runtime's scope. */
  static readonly sessionHomes = Layer.effect(
    SessionHomes,
    WorkspaceDisks.useSync((disks) =>
      SessionHomes.of({
        mount: (request) =>
          disks
            .mount({
              workspaceId: request.workspaceId,
              sessionId: request.sessionId,
              persistence: request.persistence
            })
            .pipe(
              Effect.mapError((error) => new RuntimeLaunchError({ message: error.message, cause: error }))
            )
      })
    )
  )
}
