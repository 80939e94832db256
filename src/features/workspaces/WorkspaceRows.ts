import { Effect } from "effect"
import * as Sql from "../../platform/db/Sql.ts"
import type { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { StorageLimitReached } from "../../kernel/Workspace.ts"
import type { SessionType } from "../../kernel/Session.ts"
import type { WorkspaceInfo, WorkspaceSnapshotInfo } from "../../kernel/Workspace.ts"

/** A workspace's row in the `workspaces` table. */
export interface WorkspaceRecord {
  readonly id: string
  readonly account_id: string
  readonly name: string
  readonly session_type: SessionType | null
  readonly image: string | null
  readonly template: boolean
  readonly persistence: boolean
  readonly assistant_home: boolean
  readonly source_workspace_id: string | null
  readonly github_repo: string | null
  readonly node_id: string | null
  readonly status: WorkspaceInfo["status"]
  readonly used_bytes: string | number
  readonly created_at: Date
  readonly updated_at: Date
}

/** A workspace as its use cases read it: its row, its node's URL (from the cluster) and its sessions (from the sessions). */
export interface WorkspaceRow extends WorkspaceRecord {
  readonly node_url: string | null
  readonly active_session_id: string | null
  readonly last_session_id: string | null
}

export interface SnapshotRow {
  readonly id: string
  readonly workspace_id: string
  readonly account_id: string
  readonly name: string
  readonly blob_key: string
  readonly used_bytes: string | number
  readonly created_at: Date
  readonly restored_at: Date | null
}

/** The workspace query (its rows alone: `WorkspaceStore` adds their node's URL and sessions). */
export const selectWorkspaces = (sql: SqlClient.SqlClient) => sql`SELECT w.* FROM workspaces w`

export const toWorkspaceInfo = (row: WorkspaceRow): WorkspaceInfo => ({
  id: row.id,
  name: row.name,
  created_at: row.created_at,
  persistence: row.persistence,
  active_session_id: row.active_session_id,
  last_session_id: row.last_session_id,
  assistant_home: row.assistant_home,
  github_repo: row.github_repo,
  image: row.image,
  node_endpoint: row.node_url,
  session_type: row.session_type,
  source_workspace_id: row.source_workspace_id,
  status: row.status,
  template: row.template,
  used_bytes: Number(row.used_bytes)
})

export const toSnapshotInfo = (row: SnapshotRow): WorkspaceSnapshotInfo => ({
  id: row.id,
  workspace_id: row.workspace_id,
  name: row.name,
  created_at: row.created_at,
  used_bytes: Number(row.used_bytes),
  restored_at: row.restored_at
})

/** Where a snapshot's archive lives in the blob store. */
export const snapshotKey = (workspaceId: string, snapshotId: string) =>
  `workspaces/${workspaceId}/snapshots/${snapshotId}.tar.zst`

const ADJECTIVES = [
  "amber",
  "brave",
  "calm",
  "clever",
  "cosmic",
  "crisp",
  "dusty",
  "eager",
  "fancy",
  "gentle",
  "golden",
  "happy",
  "hidden",
  "icy",
  "jolly",
  "keen",
  "lively",
  "lucky",
  "mellow",
  "misty",
  "noble",
  "polished",
  "quiet",
  "rapid",
  "rosy",
  "shiny",
  "silent",
  "snowy",
  "sunny",
  "swift",
  "tidy",
  "vivid",
  "witty"
]
const NOUNS = [
  "badger",
  "beacon",
  "canyon",
  "cedar",
  "comet",
  "delta",
  "ember",
  "falcon",
  "fjord",
  "glacier",
  "harbor",
  "heron",
  "island",
  "lagoon",
  "maple",
  "meadow",
  "nebula",
  "otter",
  "panda",
  "pebble",
  "pine",
  "quartz",
  "raven",
  "reef",
  "river",
  "sparrow",
  "summit",
  "tiger",
  "tundra",
  "valley",
  "walrus",
  "willow",
  "zephyr"
]

/** A generated name: two words and four digits (`brave-otter-4821`). */
export const generatedName = () =>
  `${ADJECTIVES[Crypto.randomInt(ADJECTIVES.length)]}-${NOUNS[Crypto.randomInt(NOUNS.length)]}-${Crypto.randomInt(1000, 10000)}`

/**
 * Refused once what the account's workspaces, snapshots and session logs (`logBytes`, their
 * owner's count) hold reaches its cap (`WORKSPACE_STORAGE_MB_PER_ACCOUNT`).
 */
export const checkStorage = (
  sql: SqlClient.SqlClient,
  accountId: string,
  capMb: number,
  logBytes: (accountId: string) => Effect.Effect<number>
) =>
  Effect.gen(function* () {
    const [used] = yield* sql<{ readonly bytes: string }>`
      SELECT (coalesce((SELECT sum(used_bytes) FROM workspaces WHERE account_id = ${accountId}), 0)
        + coalesce((SELECT sum(used_bytes) FROM workspace_snapshots WHERE account_id = ${accountId}), 0)
      )::text AS bytes`.pipe(Sql.orDefect)
    const bytes = Number(used?.bytes ?? 0) + (yield* logBytes(accountId))
    if (bytes >= capMb * 1024 * 1024)
      return yield* new StorageLimitReached({
        detail: `Workspace storage is full: the account's workspaces, snapshots and session logs hold ${Math.round(bytes / 1024 / 1024)} MB of ${capMb} MB. Delete snapshots or workspaces.`
      })
  })
