import { Clock, Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { BlobStore } from "../blobs/BlobStore.ts"
import { isUuid } from "../domain/Ids.ts"
import { WebhookOutbox } from "../webhooks/Outbox.ts"
import { JobFailed, jobKind, type JobRun } from "../jobs/JobKind.ts"
import { WorkspaceDisks } from "./WorkspaceDisks.ts"
import { ServiceConfig } from "../Config.ts"
import { Placement, PLACEABLE_WITHIN_MS } from "../cluster/Placement.ts"
import { Audit } from "../audit/Audit.ts"
import * as Exec from "../sandbox/Exec.ts"
import { Sessions } from "../sessions/Sessions.ts"
import { freshSession } from "../jobs/JobSession.ts"
import { snapshotKey, type SnapshotRow, toSnapshotInfo } from "./WorkspaceRows.ts"

const Selector = Schema.String.annotate({ description: "A workspace's name (preferred) or id." })
const SnapshotName = Schema.String.check(
  Schema.isPattern(/^[a-z0-9]+(?:-[a-z0-9]+)*$/),
  Schema.isMaxLength(63)
)

const SnapshotInput = Schema.Struct({ workspace: Selector, name: Schema.optionalKey(SnapshotName) })
const RestoreInput = Schema.Struct({ workspace: Selector, snapshot: SnapshotName })
const CloneInput = Schema.Struct({ source: Schema.String, target: Schema.String })

const fatal = (code: string, detail: string) => new JobFailed({ code, detail, retryable: false })

/** `snapshot`, `restore`, `import` and the internal `clone`: jobs on a workspace's disk, on the node that holds it. */
export const workspaceJobKinds = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const config = yield* ServiceConfig
  const placement = yield* Placement
  const sessions = yield* Sessions
  const audit = yield* Audit
  const disks = yield* WorkspaceDisks
  const blobs = yield* BlobStore
  const outbox = yield* WebhookOutbox
  const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

  /** The owner's workspace by name or id, or the job fails: it was deleted meanwhile. */
  const find = (run: JobRun, selector: string) =>
    Effect.gen(function* () {
      const rows = yield* sql<{ readonly id: string; readonly template: boolean }>`
        SELECT id, template FROM workspaces WHERE account_id = ${run.owner.accountId}
          AND ${isUuid(selector) ? sql`id = ${selector}::uuid` : sql`name = ${selector}`}`.pipe(Effect.orDie)
      const row = rows[0]
      if (row === undefined) return yield* fatal("workspace_not_found", "Workspace not found.")
      return row
    })

  /**
   * Where the job must run: the node holding the workspace's disk while it
   * lives. Claimed elsewhere (queued before the disk had a node, or taken
   * from a node that looked gone), it is handed to that node.
   */
  const onDiskNode = (workspaceId: string) =>
    Effect.gen(function* () {
      const [row] = yield* sql<{ readonly node_id: string | null }>`
        SELECT node_id FROM workspaces WHERE id = ${workspaceId}`.pipe(Effect.orDie)
      if (row?.node_id == null || row.node_id === config.nodeId) return
      if (!(yield* placement.isLive(row.node_id))) return
      return yield* new JobFailed({
        code: "moved",
        detail: "The workspace's disk is on another node: the job runs there.",
        retryable: true,
        deferred: true,
        deferMs: 100,
        pinTo: row.node_id
      })
    })

  /**
   * Holds the workspace in `status` for job `jobId` while `work` runs: taken
   * from `ready` (or from a hold of this job's earlier attempt, or of a job
   * that no longer runs: a node that died mid-job) with no open session and
   * no session's runtime still on its disk (unless that runtime's node is
   * gone). A session's create locks the same row, so nothing writes to the
   * disk meanwhile. Busy, the job waits (tried again soon, uncounted).
   */
  const holding = <A>(id: string, status: string, jobId: string, work: Effect.Effect<A, JobFailed>) =>
    Effect.gen(function* () {
      const cutoff = new Date(Date.now() - PLACEABLE_WITHIN_MS)
      const taken = yield* sql
        .withTransaction(
          Effect.gen(function* () {
            const [row] = yield* sql<{ readonly free: boolean }>`
              SELECT (w.status = 'ready' OR w.held_by = ${jobId}
                  OR NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = w.held_by AND j.state IN ('queued', 'running')))
                AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.workspace_id = w.id
                  AND s.status IN ('creating', 'ready'))
                AND (w.mounted_by IS NULL
                  OR (SELECT s.node_id FROM sessions s WHERE s.id = w.mounted_by) IS DISTINCT FROM ${config.nodeId}
                    AND NOT EXISTS (SELECT 1 FROM sessions s JOIN nodes n ON n.id = s.node_id
                      WHERE s.id = w.mounted_by AND n.last_seen > ${cutoff})) AS free
              FROM workspaces w WHERE id = ${id} FOR UPDATE`
            if (row === undefined || !row.free) return false
            yield* sql`UPDATE workspaces SET status = ${status}, held_by = ${jobId}, mounted_by = NULL,
              updated_at = ${yield* now} WHERE id = ${id}`
            return true
          })
        )
        .pipe(Effect.orDie)
      if (!taken)
        return yield* new JobFailed({
          code: "workspace_busy",
          detail: "The workspace has an open session or another job: this one waits for it.",
          retryable: true,
          deferred: true,
          // A session's runtime gives the disk back within seconds of its end; a job may take longer.
          deferMs: 500
        })
      return yield* work.pipe(
        Effect.ensuring(
          sql`UPDATE workspaces SET status = 'ready', held_by = NULL WHERE id = ${id} AND held_by = ${jobId}`.pipe(
            Effect.ignore
          )
        )
      )
    })

  const disk = <A>(effect: Effect.Effect<A, { readonly message: string }>) =>
    effect.pipe(
      Effect.mapError(
        (error) => new JobFailed({ code: "disk_failed", detail: error.message, retryable: true })
      )
    )

  const snapshot = jobKind({
    kind: "snapshot",
    workspace: (input) => input.workspace,
    description:
      "Archives a workspace (tar + zstd) into the blob store as a snapshot named `name` (generated when omitted), on the node that holds its disk. Waits while a session is open on it. Result: the WorkspaceSnapshotInfo.",
    input: SnapshotInput,
    requires: ["workspaces.write"],
    runtime: null,
    timeoutSeconds: () => 3600,
    run: (input, run) =>
      Effect.gen(function* () {
        const workspace = yield* find(run, input.workspace)
        const name = input.name ?? `snap-${Crypto.randomBytes(4).toString("hex")}`
        const id = Crypto.randomUUID()
        yield* onDiskNode(workspace.id)
        const row = yield* holding(
          workspace.id,
          "snapshotting",
          run.id,
          Effect.gen(function* () {
            yield* disk(disks.materialize(workspace.id))
            const file = yield* disks.tempFile("snapshot.tar.zst")
            yield* disk(disks.disk.archive(workspace.id, file))
            const key = snapshotKey(workspace.id, id)
            // The archive is kept only with its row: interrupted in between (a cancel), it goes.
            return yield* Effect.gen(function* () {
              const { bytes } = yield* blobs.putFile(key, file)
              const at = yield* now
              return yield* sql
                .withTransaction(
                  Effect.gen(function* () {
                    const rows = yield* sql<SnapshotRow>`
                  INSERT INTO workspace_snapshots (id, workspace_id, account_id, name, blob_key, used_bytes, created_at)
                  VALUES (${id}, ${workspace.id}, ${run.owner.accountId}, ${name}, ${key}, ${bytes}, ${at})
                  ON CONFLICT (workspace_id, name) DO NOTHING RETURNING *`
                    const inserted = rows[0]
                    if (inserted === undefined) return undefined
                    yield* outbox.emit(run.owner.accountId, "snapshot.created", {
                      id,
                      workspace_id: workspace.id,
                      name,
                      used_bytes: bytes
                    })
                    return inserted
                  })
                )
                .pipe(Effect.orDie)
            }).pipe(
              Effect.onExit((exit) =>
                exit._tag === "Success" && exit.value !== undefined ? Effect.void : blobs.remove(key)
              )
            )
          }).pipe(Effect.scoped)
        )
        if (row === undefined)
          return yield* fatal("snapshot_exists", `The workspace has a snapshot named ${name}.`)
        return { result: toSnapshotInfo(row) }
      })
  })

  const restore = jobKind({
    kind: "restore",
    workspace: (input) => input.workspace,
    description:
      "Replaces a workspace's content with its snapshot `snapshot`, atomically (stopped halfway, the workspace keeps its old content), on the node that holds its disk, or on any node when that one is gone (the workspace's disk then lives there). Waits while a session is open on it. Result: the WorkspaceSnapshotInfo with `restored_at`.",
    input: RestoreInput,
    requires: ["workspaces.write"],
    runtime: null,
    timeoutSeconds: () => 3600,
    run: (input, run) =>
      Effect.gen(function* () {
        const workspace = yield* find(run, input.workspace)
        const [found] = yield* sql<SnapshotRow>`
          SELECT * FROM workspace_snapshots WHERE workspace_id = ${workspace.id} AND name = ${input.snapshot}`.pipe(
          Effect.orDie
        )
        if (found === undefined) return yield* fatal("snapshot_not_found", "Snapshot not found.")
        yield* onDiskNode(workspace.id)
        const restored = yield* holding(
          workspace.id,
          "restoring",
          run.id,
          Effect.gen(function* () {
            const file = yield* disks.tempFile("restore.tar.zst")
            yield* blobs.getFile(found.blob_key, file)
            yield* disk(disks.disk.restore(workspace.id, file))
            yield* disk(disks.materialize(workspace.id))
            yield* disk(disks.measure(workspace.id))
            const at = yield* now
            return yield* sql
              .withTransaction(
                Effect.gen(function* () {
                  const rows = yield* sql<SnapshotRow>`
                    UPDATE workspace_snapshots SET restored_at = ${at} WHERE id = ${found.id} RETURNING *`
                  // Deleted while it was unpacked: the content is the snapshot's all the same.
                  const restoredRow = rows[0] ?? { ...found, restored_at: at }
                  yield* outbox.emit(run.owner.accountId, "snapshot.restored", {
                    id: found.id,
                    workspace_id: workspace.id,
                    name: found.name,
                    used_bytes: Number(found.used_bytes)
                  })
                  return restoredRow
                })
              )
              .pipe(Effect.orDie)
          }).pipe(Effect.scoped)
        )
        return { result: toSnapshotInfo(restored) }
      })
  })

  const clone = jobKind({
    kind: "clone",
    description: "Copies a workspace's content into a new one (for `POST /v1/workspaces` with `clone_from`).",
    input: CloneInput,
    requires: ["workspaces.write"],
    runtime: null,
    timeoutSeconds: () => 3600,
    internal: true,
    run: (input, run) =>
      Effect.gen(function* () {
        yield* onDiskNode(input.source)
        yield* sql`UPDATE workspaces SET held_by = ${run.id} WHERE id = ${input.target} AND status = 'cloning'`.pipe(
          Effect.orDie
        )
        // The source held while it is copied: no session writes to it, no restore switches it.
        const here = yield* disks.disk.exists(input.source)
        if (here && (yield* disks.owns(input.source)))
          yield* holding(input.source, "cloning", run.id, disk(disks.disk.clone(input.source, input.target)))
        else {
          // The source's node is gone (or it never had a disk): its newest snapshot, if it has one.
          const [newest] = yield* sql<SnapshotRow>`
            SELECT * FROM workspace_snapshots WHERE workspace_id = ${input.source}
            ORDER BY created_at DESC LIMIT 1`.pipe(Effect.orDie)
          if (newest !== undefined)
            yield* Effect.scoped(
              Effect.gen(function* () {
                const file = yield* disks.tempFile("clone.tar.zst")
                yield* blobs.getFile(newest.blob_key, file)
                yield* disk(disks.disk.restore(input.target, file))
              })
            )
        }
        yield* disk(disks.materialize(input.target))
        const bytes = yield* disk(disks.measure(input.target))
        yield* sql`UPDATE workspaces SET status = 'ready', held_by = NULL
          WHERE id = ${input.target} AND status = 'cloning'`.pipe(Effect.orDie)
        return { result: { workspace_id: input.target, used_bytes: bytes } }
      })
  })

  const importRepo = jobKind({
    kind: "import",
    workspace: (input) => input.workspace,
    description:
      "Clones a git repository (`url`, http or https; `ref`: a branch, tag or commit, default the remote's HEAD) into a sandbox workspace's home, with `git` inside a sandbox session on it: through that session's metering egress proxy (its SSRF guard and its billing apply). Result: `{ workspace_id, url, commit }`. A clone git refuses (no such repository, no access, no such ref) fails the job, not retried.",
    input: ImportInput,
    requires: ["workspaces.write", "sessions.write", "exec.write"],
    runtime: "sandbox",
    timeoutSeconds: () => IMPORT_TIMEOUT_SECONDS + 120,
    run: (input, run) =>
      Effect.gen(function* () {
        const workspace = yield* find(run, input.workspace)
        const url = publicUrl(input.url)
        yield* onDiskNode(workspace.id)
        const exec = yield* holding(
          workspace.id,
          "importing",
          run.id,
          Effect.gen(function* () {
            const { sessionId, runtime } = yield* freshSession(
              sessions,
              run,
              "sandbox",
              { session_type: "sandbox", workspace: workspace.id },
              { workspaceStatus: "importing" }
            )
            const outcome = yield* Exec.execute(audit, sessionId, runtime, run.owner, {
              command: ["sh", "-c", IMPORT_SCRIPT, "sh", input.url, input.ref ?? ""],
              // Every address through the session's proxy, loopback too: it decides what may be reached.
              env: { NO_PROXY: "", no_proxy: "", GIT_TERMINAL_PROMPT: "0" },
              timeout_seconds: IMPORT_TIMEOUT_SECONDS
            }).pipe(
              Effect.mapError(
                (error) => new JobFailed({ code: "runtime_failed", detail: error.message, retryable: true })
              )
            )
            return outcome.background ? yield* Effect.die("an import runs in the foreground") : outcome.result
          }).pipe(Effect.scoped)
        )
        if (exec.exit_code !== 0)
          return yield* fatal(
            "import_failed",
            `git could not clone ${url}: ${redact(exec.stderr, input.url, url).trim().slice(-1000) || exec.status}`
          )
        yield* sql`UPDATE workspaces SET github_repo = ${url}, updated_at = ${yield* now}
          WHERE id = ${workspace.id}`.pipe(Effect.orDie)
        return { result: { workspace_id: workspace.id, url, commit: exec.stdout.trim() } }
      })
  })

  return [snapshot, restore, clone, importRepo]
})

/** An import's time limit for git. */
const IMPORT_TIMEOUT_SECONDS = 1800

/**
 * Clones `$1` (at `$2` when given) beside the home's content, then moves it
 * in: a retried attempt first removes what an interrupted one left.
 */
const IMPORT_SCRIPT = [
  "set -e",
  "cd /root",
  "rm -rf .rbs-import",
  'if [ -n "$2" ]; then git clone --quiet -- "$1" .rbs-import && git -C .rbs-import checkout --quiet "$2"',
  'else git clone --quiet --depth 1 -- "$1" .rbs-import; fi',
  "find .rbs-import -mindepth 1 -maxdepth 1 -exec mv -t . {} +",
  "rmdir .rbs-import",
  "git rev-parse HEAD"
].join("\n")

const ImportInput = Schema.Struct({
  workspace: Selector,
  url: Schema.String.check(
    Schema.makeFilter((url) => {
      try {
        const parsed = new URL(url)
        return parsed.protocol === "http:" || parsed.protocol === "https:"
      } catch {
        return false
      }
    })
  ),
  ref: Schema.optionalKey(Schema.String.check(Schema.isPattern(/^[A-Za-z0-9._/-]{1,255}$/)))
})

/** The URL without its credentials: what is stored and shown. */
export const publicUrl = (url: string) => {
  const parsed = new URL(url)
  parsed.username = ""
  parsed.password = ""
  return parsed.toString()
}

const redact = (text: string, secret: string, shown: string) =>
  secret === shown ? text : text.split(secret).join(shown)
