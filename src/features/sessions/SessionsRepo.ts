import type { DrainWait } from "../../platform/cluster/NodeDrain.ts"
import * as Sql from "../../platform/db/Sql.ts"
import { RecordedSessions } from "../recordings/Recordings.ts"
import { OpenSessions } from "../limits/ConcurrencySlots.ts"
import { PlacedSessions } from "../../platform/cluster/Placement.ts"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import type * as Statement from "effect/sql/Statement"
import { EndedReason, Isolation, SessionStatus, SessionType } from "../../kernel/Session.ts"
import type { SessionAddress } from "../../platform/cluster/SessionAddress.ts"
import { StoredProxy, StoredProxyError } from "./SessionProxy.ts"
import type { UpstreamFailure } from "../../runtime/EgressTap.ts"
import { BrowserIdentity } from "../../kernel/BrowserIdentity.ts"
import { SandboxResources } from "../../kernel/SandboxResources.ts"

export const SessionRow = Schema.Struct({
  id: Schema.String,
  account_id: Schema.String,
  api_key_id: Schema.NullOr(Schema.String),
  status: SessionStatus,
  session_type: SessionType,
  /** A browser's isolation (`browser` for a sandbox). */
  isolation: Isolation,
  /** A sandbox's image as named on create; null for a browser. */
  image: Schema.NullOr(Schema.String),
  profile: Schema.String,
  device: Schema.String,
  ttl_seconds: Schema.Number,
  idle_timeout_seconds: Schema.NullOr(Schema.Number),
  bytes_up: Schema.BigInt,
  bytes_down: Schema.BigInt,
  proxy_ip: Schema.NullOr(Schema.String),
  proxy_region: Schema.NullOr(Schema.String),
  region: Schema.String,
  node_id: Schema.String,
  node_url: Schema.NullOr(Schema.String),
  /** Open CDP connections as the owner last flushed them (any node's view of them). */
  active_connection_leases: Schema.Number,
  created_at: Schema.Date,
  ready_at: Schema.NullOr(Schema.Date),
  expires_at: Schema.Date,
  ended_at: Schema.NullOr(Schema.Date),
  ended_reason: Schema.NullOr(EndedReason),
  /** False for a test-mode key's session (metered and charged as a live one is). */
  live: Schema.Boolean,
  /** Created with `recording: true`. */
  recording: Schema.Boolean,
  /** Created keeping a log (`logs`). */
  logs: Schema.Boolean,
  /** The workspace it runs on, and whether it keeps its changes there. */
  workspace_id: Schema.NullOr(Schema.String),
  persistence: Schema.NullOr(Schema.Boolean),
  /** The caller's labels (`metadata` at create). */
  metadata: Schema.Record(Schema.String, Schema.String),
  /** The caller's own upstream proxy, its credentials sealed (`SessionProxy`). */
  proxy: Schema.NullOr(StoredProxy),
  /** Its proxy refuses the hosts of the ad and tracker lists. */
  block_ads: Schema.Boolean,
  /** The last failure of its own upstream proxy, and how many requests it failed. */
  proxy_error: Schema.NullOr(StoredProxyError),
  /** What its pages say of their browser (`user_agent`, `locale`, `timezone`, `viewport` at create). */
  identity: Schema.NullOr(BrowserIdentity),
  /** The extensions its browser loads (`extensions` at create). */
  extension_ids: Schema.Array(Schema.String),
  /** A sandbox's CPUs, memory, disk and processes, resolved at create; null for a browser. */
  resources: Schema.NullOr(SandboxResources),
  /** The account's image it runs (`image` at create naming one of the account's); null: the node's `image`. */
  image_id: Schema.NullOr(Schema.String)
})
export type SessionRow = typeof SessionRow.Type

/** An upstream failure as the row keeps it: JSON, or null for none. */
const proxyErrorJson = (failure: UpstreamFailure | undefined) =>
  failure === undefined
    ? null
    : JSON.stringify({
        reason: failure.reason,
        status: failure.status,
        at: failure.at.toISOString(),
        failures: failure.failures
      })

const decodeRows = Effect.flatMap(Schema.decodeUnknownEffect(Schema.Array(SessionRow)))

/**
 * A feature's share of the statement that changes a session's row: CTEs of its `WITH` list, read
 * from the changed row's CTE. A part may also return a value (a scalar SQL expression over its
 * CTEs, which then run even if they only read); the statement returns it beside the row.
 */
export interface StatementPart {
  readonly ctes: Statement.Fragment
  readonly output?: Statement.Fragment | undefined
}

/** The changed row, and each part's output (undefined for a part without one), in their order. */
export interface Changed {
  readonly row: SessionRow
  readonly outputs: ReadonlyArray<unknown>
}

const OUTPUT = "rbs_part_output_"

export interface NewSession {
  readonly id: string
  readonly accountId: string
  readonly apiKeyId: string | null
  readonly live: boolean
  readonly sessionType: SessionType
  readonly isolation: Isolation
  readonly image: string | null
  readonly profile: string
  readonly device: string
  readonly ttlSeconds: number
  /** Null: it never ends for being idle. */
  readonly idleTimeoutSeconds: number | null
  readonly region: string
  readonly nodeId: string
  readonly createdAt: Date
  readonly expiresAt: Date
  readonly recording: boolean
  readonly logs: boolean
  readonly workspaceId?: string | null | undefined
  readonly persistence?: boolean | null | undefined
  readonly metadata?: Readonly<Record<string, string>> | undefined
  readonly proxy?: StoredProxy | null | undefined
  readonly blockAds?: boolean | undefined
  readonly identity?: BrowserIdentity | null | undefined
  readonly extensions?: ReadonlyArray<string> | undefined
  readonly resources?: SandboxResources | null | undefined
  readonly imageId?: string | null | undefined
}

/** A session's egress so far, as its proxy counts it. */
export interface EgressFigures {
  readonly bytesUp: number
  readonly bytesDown: number
  readonly proxyIp?: string | undefined
  /** Its own upstream proxy's last failure (`proxy` at create). */
  readonly proxyError?: UpstreamFailure | undefined
}

/** What an owner flushes while its session runs: the egress so far and the open CDP connections. */
export interface LiveFigures extends EgressFigures {
  readonly leases: number
}

/** Position in the newest-first order: `(created_at, id)`, both descending. */
export interface Cursor {
  readonly createdAt: Date
  readonly id: string
}

/** What `markReady` writes: the row becomes `ready` with these. */
export interface ReadyFacts {
  readonly at: Date
  /** "Chromium 156 headless, 1280x720": what the entity took from the pool. */
  readonly device: string
  readonly proxyRegion: string | null
  /** The node whose runner holds the browser, and where other nodes reach it. */
  readonly nodeId: string
  readonly nodeUrl: string
}

/** SQL for the `sessions` table. The row is the source of truth; failures here are defects. */
const UsageRow = Schema.Struct({
  region: Schema.String,
  api_key_id: Schema.NullOr(Schema.String),
  day: Schema.String,
  sessions: Schema.BigInt,
  bytes_up: Schema.BigInt,
  bytes_down: Schema.BigInt,
  billed: Schema.BigInt
})
const decodeUsage = Effect.flatMap(Schema.decodeUnknownEffect(Schema.Array(UsageRow)))

export class SessionsRepo extends Context.Service<
  SessionsRepo,
  {
    /**
     * A new `creating` row, with `parts` (the outbox's `session.created`, its audit record) reading
     * it from the CTE `changed` in the same statement: one round trip.
     */
    readonly insert: (
      session: NewSession,
      changed?: string,
      parts?: ReadonlyArray<StatementPart>
    ) => Effect.Effect<SessionRow>
    readonly findById: (id: string) => Effect.Effect<Option.Option<SessionRow>>
    readonly findForAccount: (accountId: string, id: string) => Effect.Effect<Option.Option<SessionRow>>
    /** Newest first; with `metadata`, only sessions whose metadata holds each of its pairs. */
    readonly list: (
      accountId: string,
      options: {
        readonly limit: number
        readonly after: Option.Option<Cursor>
        readonly metadata?: ReadonlyArray<readonly [string, string]> | undefined
      }
    ) => Effect.Effect<ReadonlyArray<SessionRow>>
    /**
     * `creating` -> `ready`; `None` when the session is no longer creating. Use `SessionLifecycle`.
     * `parts` join the statement's `WITH` list, reading the changed row from the CTE `changed`.
     */
    readonly markReady: (
      id: string,
      ready: ReadyFacts,
      changed: string,
      parts: ReadonlyArray<StatementPart>
    ) => Effect.Effect<Option.Option<Changed>>
    /** An open session -> `closed` / `error`; `None` when it had already ended. Use `SessionLifecycle`. */
    readonly markEnded: (
      id: string,
      ended: {
        readonly status: "closed" | "error"
        readonly reason: EndedReason
        readonly at: Date
        readonly counters?: EgressFigures | undefined
      },
      changed: string,
      parts: ReadonlyArray<StatementPart>
    ) => Effect.Effect<Option.Option<Changed>>
    /** Live figures of an open session (at least once a second while they change). */
    readonly flushLive: (id: string, figures: LiveFigures) => Effect.Effect<void>
    /**
     * In one read, up to `limit` of each: open sessions past their TTL
     * (`expired`), and sessions still `creating` since before `creatingBefore`
     * (`stuck`: their start may have been lost).
     */
    readonly overdue: (
      now: Date,
      creatingBefore: Date,
      limit: number
    ) => Effect.Effect<{
      readonly expired: ReadonlyArray<SessionAddress>
      readonly stuck: ReadonlyArray<SessionAddress>
    }>
    /** Open sessions recorded for this node. */
    readonly openOnNode: (nodeId: string) => Effect.Effect<ReadonlyArray<string>>
    /** An account's open sessions (of one kind, when given), oldest first. */
    readonly openOfAccount: (
      accountId: string,
      sessionType: SessionType | undefined
    ) => Effect.Effect<ReadonlyArray<SessionAddress>>
    /** Open sessions of nodes not seen alive since `cutoff` (another node's heartbeat). */
    /** Open sessions on these nodes, at most `limit`. */
    readonly openOnNodes: (
      nodeIds: ReadonlyArray<string>,
      limit: number
    ) => Effect.Effect<ReadonlyArray<string>>
    /**
     * The account's sessions created in `[from, to)`, summed per region, key
     * and UTC day (the usage report; the index covers every column read).
     */
    readonly usage: (
      accountId: string,
      from: Date,
      to: Date
    ) => Effect.Effect<
      ReadonlyArray<{
        readonly region: string
        readonly api_key_id: string | null
        readonly day: string
        readonly sessions: bigint
        readonly bytes_up: bigint
        readonly bytes_down: bigint
        readonly billed: bigint
      }>
    >
    /** Each workspace's open session (the newest) and its last one, if any. */
    readonly onWorkspaces: (
      workspaceIds: ReadonlyArray<string>
    ) => Effect.Effect<ReadonlyMap<string, { readonly active: string | null; readonly last: string | null }>>
    /** Which of `ids` are open (`creating` or `ready`). */
    readonly openAmong: (ids: ReadonlyArray<string>) => Effect.Effect<ReadonlySet<string>>
    /** The open session on the workspace, if any (under the workspace's lock: there is one at most). */
    readonly openOnWorkspace: (workspaceId: string) => Effect.Effect<string | null>
    readonly countByStatus: Effect.Effect<ReadonlyArray<{ readonly status: string; readonly count: number }>>
  }
>()("rbs/sessions/SessionsRepo") {
  static readonly layer = Layer.effect(
    SessionsRepo,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient

      const insert = (s: NewSession, changed = "inserted", parts: ReadonlyArray<StatementPart> = []) =>
        withParts(
          sql`
          INSERT INTO sessions (id, account_id, api_key_id, live, status, session_type, isolation, image, profile, device, ttl_seconds, idle_timeout_seconds, region, node_id, created_at, expires_at, recording, logs, workspace_id, persistence, metadata, proxy, block_ads, identity, extension_ids, image_id, resources)
          VALUES (${s.id}, ${s.accountId}, ${s.apiKeyId}, ${s.live}, 'creating', ${s.sessionType}, ${s.isolation}, ${s.image}, ${s.profile}, ${s.device}, ${s.ttlSeconds}, ${s.idleTimeoutSeconds}, ${s.region}, ${s.nodeId}, ${s.createdAt}, ${s.expiresAt}, ${s.recording}, ${s.logs}, ${s.workspaceId ?? null}, ${s.persistence ?? null}, ${JSON.stringify(s.metadata ?? {})}::jsonb, ${s.proxy == null ? null : JSON.stringify(s.proxy)}::jsonb, ${s.blockAds ?? false}, ${s.identity == null ? null : JSON.stringify(s.identity)}::jsonb, ${JSON.stringify(s.extensions ?? [])}::jsonb, ${s.imageId ?? null}, ${s.resources == null ? null : JSON.stringify(s.resources)}::jsonb)
          RETURNING *`,
          changed,
          parts
        ).pipe(Effect.map((inserted) => Option.getOrThrow(inserted).row))

      const first = Effect.map((rows: ReadonlyArray<SessionRow>) => Option.fromNullishOr(rows[0]))

      const findById = (id: string) => sql`SELECT * FROM sessions WHERE id = ${id}`.pipe(decodeRows, first)

      const findForAccount = (accountId: string, id: string) =>
        sql`SELECT * FROM sessions WHERE id = ${id} AND account_id = ${accountId}`.pipe(decodeRows, first)

      const list = (
        accountId: string,
        options: {
          readonly limit: number
          readonly after: Option.Option<Cursor>
          readonly metadata?: ReadonlyArray<readonly [string, string]> | undefined
        }
      ) => {
        // Each pair its own containment (the GIN index answers each): a key asked with two values matches none.
        const conditions = [
          sql`account_id = ${accountId}`,
          ...(options.metadata ?? []).map(
            ([key, value]) => sql`metadata @> ${JSON.stringify({ [key]: value })}::jsonb`
          ),
          ...Option.match(options.after, {
            onNone: () => [],
            onSome: (after) => [sql`(created_at, id) < (${after.createdAt}, ${after.id})`]
          })
        ]
        return sql`
          SELECT * FROM sessions WHERE ${sql.and(conditions)}
          ORDER BY created_at DESC, id DESC LIMIT ${options.limit}`.pipe(decodeRows)
      }

      /** `change` (an UPDATE ... RETURNING *) with the parts that read its row, in one statement. */
      /** `change` (an UPDATE ... RETURNING *) with the parts that read its row, in one statement. */
      const withParts = (
        change: Statement.Fragment,
        changed: string,
        parts: ReadonlyArray<StatementPart>
      ) => {
        const outputs = parts.flatMap((part, index) =>
          part.output === undefined ? [] : [sql`, (${part.output}) AS ${sql(`${OUTPUT}${index}`)}`]
        )
        const statement =
          parts.length === 0
            ? sql`${change}`
            : sql`WITH ${sql(changed)} AS (${change}), ${sql.join(", ", false)(parts.map((part) => part.ctes))}
                SELECT ${sql(changed)}.*${sql.join("", false)(outputs)} FROM ${sql(changed)}`
        return statement.pipe(
          Effect.flatMap((rows) => {
            const raw = rows[0] as Record<string, unknown> | undefined
            if (raw === undefined) return Effect.succeed(Option.none<Changed>())
            const values = parts.map((_, index) => raw[`${OUTPUT}${index}`])
            const fields = Object.fromEntries(Object.entries(raw).filter(([key]) => !key.startsWith(OUTPUT)))
            return Effect.map(Schema.decodeUnknownEffect(SessionRow)(fields), (row) =>
              Option.some<Changed>({ row, outputs: values })
            )
          })
        )
      }

      const markReady = (
        id: string,
        ready: ReadyFacts,
        changed: string,
        parts: ReadonlyArray<StatementPart>
      ) =>
        withParts(
          sql`
            UPDATE sessions SET status = 'ready', ready_at = ${ready.at}, device = ${ready.device},
              proxy_region = ${ready.proxyRegion}, node_id = ${ready.nodeId}, node_url = ${ready.nodeUrl}
            WHERE id = ${id} AND status = 'creating'
            RETURNING *`,
          changed,
          parts
        )

      const markEnded = (
        id: string,
        ended: {
          readonly status: "closed" | "error"
          readonly reason: EndedReason
          readonly at: Date
          readonly counters?: EgressFigures | undefined
        },
        changed: string,
        parts: ReadonlyArray<StatementPart>
      ) =>
        withParts(
          sql`
            UPDATE sessions SET status = ${ended.status}, ended_reason = ${ended.reason}, ended_at = ${ended.at},
              bytes_up = coalesce(${ended.counters?.bytesUp ?? null}::bigint, bytes_up),
              bytes_down = coalesce(${ended.counters?.bytesDown ?? null}::bigint, bytes_down),
              proxy_ip = coalesce(proxy_ip, ${ended.counters?.proxyIp ?? null}::text),
              proxy_error = coalesce(${proxyErrorJson(ended.counters?.proxyError)}::jsonb, proxy_error)
            WHERE id = ${id} AND status IN ('creating', 'ready')
            RETURNING *`,
          changed,
          parts
        )

      const flushLive = (id: string, figures: LiveFigures) =>
        sql`
          UPDATE sessions SET bytes_up = ${figures.bytesUp}, bytes_down = ${figures.bytesDown},
            proxy_ip = coalesce(proxy_ip, ${figures.proxyIp ?? null}),
            proxy_error = coalesce(${proxyErrorJson(figures.proxyError)}::jsonb, proxy_error),
            active_connection_leases = ${figures.leases}
          WHERE id = ${id} AND status IN ('creating', 'ready')`.pipe(Effect.asVoid)

      const addresses = (rows: ReadonlyArray<{ readonly id: string; readonly node_id: string }>) =>
        rows.map((row): SessionAddress => ({ id: row.id, nodeId: row.node_id }))

      const overdue = (now: Date, creatingBefore: Date, limit: number) =>
        sql<{ readonly kind: "expired" | "stuck"; readonly id: string; readonly node_id: string }>`
          (SELECT 'expired' AS kind, id, node_id FROM sessions
            WHERE status IN ('creating', 'ready') AND expires_at <= ${now}
            ORDER BY expires_at LIMIT ${limit})
          UNION ALL
          (SELECT 'stuck' AS kind, id, node_id FROM sessions
            WHERE status = 'creating' AND created_at < ${creatingBefore}
            ORDER BY created_at LIMIT ${limit})`.pipe(
          Effect.map((rows) => ({
            expired: addresses(rows.filter((row) => row.kind === "expired")),
            stuck: addresses(rows.filter((row) => row.kind === "stuck"))
          }))
        )

      const openOnNodes = (nodeIds: ReadonlyArray<string>, limit: number) =>
        sql<{ readonly id: string }>`
          SELECT id FROM sessions
          WHERE status IN ('creating', 'ready') AND node_id = ANY (${nodeIds}::text[])
          LIMIT ${limit}`.pipe(Effect.map((rows) => rows.map((row) => row.id)))

      const openOfAccount = (accountId: string, sessionType: SessionType | undefined) =>
        sql<{ readonly id: string; readonly node_id: string }>`
          SELECT id, node_id FROM sessions WHERE account_id = ${accountId} AND status IN ('creating', 'ready')
            AND (${sessionType ?? null}::text IS NULL OR session_type = ${sessionType ?? null})
          ORDER BY created_at`.pipe(Effect.map(addresses))

      const openOnNode = (nodeId: string) =>
        sql<{ readonly id: string }>`
          SELECT id FROM sessions WHERE node_id = ${nodeId} AND status IN ('creating', 'ready')`.pipe(
          Effect.map((rows) => rows.map((row) => row.id))
        )

      const openAmong = (ids: ReadonlyArray<string>) =>
        ids.length === 0
          ? Effect.succeed(new Set<string>())
          : sql<{ readonly id: string }>`
              SELECT id FROM sessions WHERE id = ANY (${ids}::text[]) AND status IN ('creating', 'ready')`.pipe(
              Effect.map((rows): ReadonlySet<string> => new Set(rows.map((row) => row.id)))
            )

      const openOnWorkspace = (workspaceId: string) =>
        sql<{ readonly id: string }>`
          SELECT id FROM sessions WHERE workspace_id = ${workspaceId} AND status IN ('creating', 'ready')
          LIMIT 1`.pipe(Effect.map((rows) => rows[0]?.id ?? null))

      const usage = (accountId: string, from: Date, to: Date) =>
        // Grouped by the date, named as text after: a text key on every row costs a third more.
        sql`
          SELECT region, api_key_id, day::text AS day, sessions, bytes_up, bytes_down, billed
          FROM (
            SELECT region, api_key_id, (created_at AT TIME ZONE 'UTC')::date AS day, count(*) AS sessions,
              sum(bytes_up)::bigint AS bytes_up, sum(bytes_down)::bigint AS bytes_down,
              sum(billed_micro_usd)::bigint AS billed
            FROM sessions
            WHERE account_id = ${accountId} AND created_at >= ${from} AND created_at < ${to}
            GROUP BY 1, 2, 3
          ) g`.pipe(decodeUsage)

      const onWorkspaces = (workspaceIds: ReadonlyArray<string>) =>
        workspaceIds.length === 0
          ? Effect.succeed(
              new Map<string, { readonly active: string | null; readonly last: string | null }>()
            )
          : sql<{
              readonly workspace_id: string
              readonly active: string | null
              readonly last: string | null
            }>`
              SELECT w::text AS workspace_id,
                (SELECT s.id FROM sessions s WHERE s.workspace_id = w AND s.status IN ('creating', 'ready')
                  ORDER BY s.created_at DESC LIMIT 1) AS active,
                (SELECT s.id FROM sessions s WHERE s.workspace_id = w ORDER BY s.created_at DESC LIMIT 1) AS last
              FROM unnest(${workspaceIds}::uuid[]) AS w`.pipe(
              Effect.map(
                (rows) =>
                  new Map(rows.map((row) => [row.workspace_id, { active: row.active, last: row.last }]))
              )
            )

      const countByStatus = sql<{ readonly status: string; readonly count: string }>`
        SELECT status, count(*)::text AS count FROM sessions GROUP BY status`.pipe(
        Effect.map((rows) => rows.map((row) => ({ status: row.status, count: Number(row.count) })))
      )

      return SessionsRepo.of(
        Sql.defects({
          insert,
          findById,
          findForAccount,
          list,
          markReady,
          markEnded,
          flushLive,
          overdue,
          openOnNode,
          openOfAccount,
          openOnNodes,
          openOnWorkspace,
          onWorkspaces,
          openAmong,
          usage,
          countByStatus
        })
      )
    })
  )
}

/** A draining node waits for its open sessions to end (`DrainWaits`). */
export const drainWait = SessionsRepo.useSync((repo): DrainWait => ({
  name: "sessions",
  left: (nodeId) => Effect.map(repo.openOnNode(nodeId), (open) => open.length)
}))

/** A recording finds its session here (`RecordedSessions`). */
export const recordedSessions = Layer.effect(
  RecordedSessions,
  Effect.gen(function* () {
    const repo = yield* SessionsRepo
    const sql = yield* SqlClient.SqlClient
    return RecordedSessions.of({
      find: repo.findForAccount,
      ended: (sessionIds) =>
        sessionIds.length === 0
          ? Effect.succeed(new Set<string>())
          : sql<{ readonly id: string }>`
              SELECT id FROM sessions WHERE id = ANY (${sessionIds}::text[]) AND status IN ('closed', 'error')`.pipe(
              Effect.map((rows) => new Set(rows.map((row) => row.id))),
              Sql.orDefect
            )
    })
  })
)

/** The concurrency cap counts an account's open sessions here (`OpenSessions`), after the account's lock. */
export const openSessions = Layer.effect(
  OpenSessions,
  SqlClient.SqlClient.useSync((sql) =>
    OpenSessions.of({
      ofAccount: (accountId) =>
        sql<{ readonly count: string; readonly next_expiry: Date | null }>`
          SELECT count(*)::text AS count, min(expires_at) AS next_expiry FROM sessions
          WHERE account_id = ${accountId} AND status IN ('creating', 'ready')`.pipe(
          Effect.map(([open]) => ({
            count: Number(open?.count ?? 0),
            nextExpiry: open?.next_expiry ?? null
          })),
          Sql.orDefect
        )
    })
  )
)

/** Placement counts a node's open sessions of a kind here (`PlacedSessions`). */
export const placedSessions = Layer.effect(
  PlacedSessions,
  SqlClient.SqlClient.useSync((sql) =>
    PlacedSessions.of({
      openOn: (nodeIds, kind) =>
        nodeIds.length === 0
          ? Effect.succeed(new Map<string, number>())
          : sql<{ readonly node_id: string; readonly open: number }>`
              SELECT node_id, count(*)::int AS open FROM sessions
              WHERE node_id = ANY (${nodeIds}::text[]) AND session_type = ${kind.sessionType}
                AND isolation = ${kind.isolation} AND status IN ('creating', 'ready')
              GROUP BY node_id`.pipe(
              Effect.map((rows) => new Map(rows.map((row) => [row.node_id, row.open]))),
              Sql.orDefect
            )
    })
  )
)
