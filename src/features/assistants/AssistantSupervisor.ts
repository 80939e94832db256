import { Cause, Clock, Effect, Layer, Queue } from "effect"
import * as Sql from "../../platform/db/Sql.ts"
import { SqlClient } from "effect/sql"
import { Audit } from "../audit/Audit.ts"
import { NodeConfig } from "../../platform/config/Config.ts"
import { systemOwner } from "../../kernel/Owner.ts"
import { ExecRequest } from "../../kernel/Sandbox.ts"
import { TTL_MAX_SECONDS } from "../../kernel/Session.ts"
import { decodeInput } from "../../kernel/Validation.ts"
import * as Exec from "../sessions/Exec.ts"
import { SERVICE_API_HOST } from "../../platform/net/Egress.ts"
import { Sessions } from "../sessions/Sessions.ts"
import { SessionsRepo } from "../sessions/SessionsRepo.ts"
import { WorkspaceStore } from "../workspaces/WorkspaceStore.ts"
import { Nodes } from "../../platform/cluster/Nodes.ts"
import { WebhookOutbox } from "../webhooks/Outbox.ts"
import * as Wake from "../../platform/work/Wake.ts"
import { AssistantTokens } from "./AssistantTokens.ts"
import type { AssistantRow } from "./AssistantRows.ts"
import { WAKE_CHANNEL } from "./AssistantWake.ts"
import * as IntentExpiry from "./IntentExpiry.ts"

/**
 * While listening, every commit that needs a runtime started (a create, a
 * resume, a running assistant's session ending) wakes every node's sweep
 * (`NOTIFY`, and a reconnected listener looks once), and the sweep sleeps
 * until the next start or intent expiry it knows is due: this poll is a
 * safety net for a lost notification.
 */
const IDLE_POLL_MS = 30_000
/** The pace while not listening, and the floor of a wait for something due now that the sweep could not take. */
const POLL_MS = 2_000
/** Wakes a little after a due time: the database keeps microseconds, and a timer may fire a hair early. */
const DUE_SLACK_MS = 10
/** A failed start is tried again after this long (by any node). */
const RETRY_AFTER_SECONDS = 15
/** A node's claim on a start; another node takes the assistant over once it lapses. */
const START_LEASE_SECONDS = 120
/** A node is taken for gone once it has not been seen for this long. */
const NODE_GONE_SECONDS = 10

/** The runtime's command: the config's, else an idle sandbox. */
const commandOf = (config: Record<string, unknown>): string | ReadonlyArray<string> =>
  typeof config.command === "string" || Array.isArray(config.command)
    ? (config.command as string | ReadonlyArray<string>)
    : ["sleep", "infinity"]

const envOf = (config: Record<string, unknown>): Record<string, string> =>
  config.env !== null && typeof config.env === "object" && !Array.isArray(config.env)
    ? (config.env as Record<string, string>)
    : {}

/**
 * The runtime's command as an exec request, decoded: it is made of the stored
 * config, so one the runtime cannot start from fails this start (its
 * `last_error`), as a bad request would, rather than reaching the sandbox.
 */
const decodeRuntime = decodeInput(ExecRequest)

/**
 * Keeps every running assistant's runtime up: on each node, a sweep claims an
 * assistant marked `running` whose session is gone (never started, ended by
 * its TTL, its node lost), starts a sandbox session on its home workspace on
 * this node, and runs `config.command` there in the background with
 * `RBS_API_URL`, `RBS_ASSISTANT_ID` and `RBS_ASSISTANT_TOKEN` (valid for that
 * session alone). Claims take turns with `FOR UPDATE SKIP LOCKED` and a lease;
 * an assistant whose disk is on another live node is left to that node. The
 * sweep also writes the expiry of the config intents nobody decided. It runs
 * when woken (`AssistantWake`), and when the next thing it knows of falls due.
 */
export const layer = Layer.effectDiscard(
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const sessions = yield* Sessions
    const sessionsRepo = yield* SessionsRepo
    const workspaces = yield* WorkspaceStore
    const nodes = yield* Nodes
    const audit = yield* Audit
    const tokens = yield* AssistantTokens
    const config = yield* NodeConfig
    const wake = yield* Queue.sliding<void>(1)
    const intents = IntentExpiry.make(sql, audit, yield* WebhookOutbox)

    /**
     * The running assistants without an open session, oldest change first: whether their start
     * lease lapsed, and when the other node holding their workspace's disk last beat (if one
     * does). Times are the database's, as the leases are.
     */
    const waiting = Effect.gen(function* () {
      const rows = yield* sql<{
        readonly id: string
        readonly workspace_id: string
        readonly session_id: string | null
        readonly start_lease_until: Date | null
        readonly lapsed: boolean
        readonly now: Date
      }>`
        SELECT id, workspace_id, session_id, start_lease_until,
          (start_lease_until IS NULL OR start_lease_until < now()) AS lapsed, now() AS now
        FROM assistants WHERE status = 'running' ORDER BY updated_at`.pipe(Sql.orDefect)
      const open = yield* sessionsRepo.openAmong(
        rows.flatMap((row) => (row.session_id === null ? [] : [row.session_id]))
      )
      const idle = rows.filter((row) => row.session_id === null || !open.has(row.session_id))
      const diskNodes = yield* workspaces.nodesOf([...new Set(idle.map((row) => row.workspace_id))])
      // The node holding each one's disk, when it is another node; the assistants whose workspace exists.
      const held = idle.flatMap((row) => {
        const node = diskNodes.get(row.workspace_id)
        if (node === undefined) return []
        return [{ row, other: node === null || node === config.nodeId ? null : node }]
      })
      const seen = yield* nodes.lastSeen([
        ...new Set(held.flatMap(({ other }) => (other === null ? [] : [other])))
      ])
      return held.map(({ row, other }) => ({
        ...row,
        otherSeen: other === null ? null : (seen.get(other) ?? null)
      }))
    })

    /** Whether the other node holding the disk (if any) is taken for gone at `now`. */
    const diskFree = (otherSeen: Date | null, now: Date) =>
      otherSeen === null || otherSeen.getTime() <= now.getTime() - NODE_GONE_SECONDS * 1000

    /**
     * Claims the first waiting assistant whose lease lapsed and whose disk is free: its lease
     * set only while it is still lapsed (the row's lock orders two nodes' claims, and the second
     * sees the first's lease), so two nodes never both start it.
     */
    const claim = Effect.gen(function* () {
      for (const row of yield* waiting) {
        if (!row.lapsed || !diskFree(row.otherSeen, row.now)) continue
        const claimed = yield* sql<AssistantRow>`
          UPDATE assistants SET start_lease_until = now() + make_interval(secs => ${START_LEASE_SECONDS})
          WHERE id = ${row.id} AND status = 'running'
            AND (start_lease_until IS NULL OR start_lease_until < now())
          RETURNING *`.pipe(Sql.orDefect)
        if (claimed.length > 0) return claimed
      }
      return []
    })

    const failed = (row: AssistantRow, reason: string) =>
      Effect.andThen(
        Effect.logWarning("assistant.start_failed", { assistantId: row.id, reason }),
        sql`
          UPDATE assistants SET last_error = ${reason.slice(0, 500)},
            start_lease_until = now() + make_interval(secs => ${RETRY_AFTER_SECONDS})
          WHERE id = ${row.id}`.pipe(Sql.orDefect)
      )

    /** Starts `row`'s runtime here; a failure is recorded on it and tried again later. */
    const start = (row: AssistantRow) =>
      Effect.gen(function* () {
        const owner = systemOwner(row.account_id)
        const created = yield* sessions
          .create(
            owner,
            {
              session_type: "sandbox",
              workspace: row.workspace_id,
              ttl_seconds: TTL_MAX_SECONDS,
              ...(row.image === null ? {} : { image: row.image })
            },
            { node: config.nodeId }
          )
          .pipe(Effect.result)
        if (created._tag === "Failure") return yield* failed(row, created.failure.message)
        const session = created.success
        // The token is good from now on: the session is the assistant's before its runtime runs.
        const [still] = yield* sql<{ readonly id: string }>`
          UPDATE assistants SET session_id = ${session.id},
            restarts = restarts + ${row.session_id === null ? 0 : 1}
          WHERE id = ${row.id} AND status = 'running' RETURNING id`.pipe(Sql.orDefect)
        if (still === undefined) {
          // Paused meanwhile: the session goes at once.
          yield* sessions.close(owner, session.id).pipe(Effect.ignore)
          return
        }
        const token = tokens.sign({
          assistantId: row.id,
          accountId: row.account_id,
          sessionId: session.id,
          expiresAt: session.expires_at
        })
        const ran = yield* Effect.scoped(
          Effect.gen(function* () {
            const connection = yield* sessions.connect(owner, session.id, "sandbox")
            const runtime = yield* decodeRuntime({
              command: commandOf(row.config),
              cwd: "/root",
              background: true,
              env: {
                ...envOf(row.config),
                // Through its egress proxy, the one way a sandbox reaches the service.
                RBS_API_URL: `http://${SERVICE_API_HOST}`,
                RBS_ASSISTANT_ID: row.id,
                RBS_ASSISTANT_TOKEN: token
              }
            })
            return yield* Exec.execute(audit, session.id, connection.runtime, owner, runtime)
          })
        ).pipe(Effect.result)
        if (ran._tag === "Failure") {
          yield* sessions.close(owner, session.id).pipe(Effect.ignore)
          return yield* failed(row, ran.failure.message)
        }
        yield* sql`
          UPDATE assistants SET start_lease_until = NULL, last_error = NULL WHERE id = ${row.id}`.pipe(
          Sql.orDefect
        )
        yield* Effect.logInfo("assistant.started", { assistantId: row.id, sessionId: session.id })
      })

    /** Expires the intents nobody decided, then starts every assistant that needs it, one at a time. */
    const sweep = Effect.gen(function* () {
      yield* intents.expireDue
      while (true) {
        const [row] = yield* claim
        if (row === undefined) return
        yield* start(row).pipe(
          Effect.catchCause((cause) =>
            Cause.hasInterruptsOnly(cause) ? Effect.failCause(cause) : failed(row, Cause.pretty(cause))
          )
        )
      }
    })

    /**
     * When the first running assistant without an open session may be
     * claimed: its lease (a start under way, or a failed one's wait) lapses,
     * or the other node holding its disk is taken for gone; now when nothing
     * holds it (a claim skipped it: another node's claim had it locked).
     */
    const nextStart = Effect.map(waiting, (rows) => {
      let next: number | undefined
      for (const row of rows) {
        const gone = row.otherSeen === null ? null : row.otherSeen.getTime() + NODE_GONE_SECONDS * 1000
        const due =
          row.start_lease_until === null && gone === null
            ? row.now.getTime()
            : Math.max(row.start_lease_until?.getTime() ?? -Infinity, gone ?? -Infinity)
        next = next === undefined ? due : Math.min(next, due)
      }
      return next === undefined ? undefined : new Date(next)
    })

    /** How long until `at`; something already due that the sweep left (locked elsewhere) is looked at again after `POLL_MS`. */
    const until = (at: Date | undefined, now: number) =>
      at === undefined ? Infinity : at.getTime() > now ? at.getTime() - now + DUE_SLACK_MS : POLL_MS

    const listener = yield* Wake.listen(WAKE_CHANNEL, wake)

    const loop = Effect.gen(function* () {
      yield* sweep
      const nextExpiry = yield* intents.nextExpiry
      const next = yield* nextStart
      const now = yield* Clock.currentTimeMillis
      const poll = listener.listening() ? IDLE_POLL_MS : POLL_MS
      yield* Effect.raceFirst(
        Queue.take(wake),
        Wake.pollPause(Math.min(poll, until(next, now), until(nextExpiry, now)))
      )
    }).pipe(
      Effect.catchCause((cause) =>
        Cause.hasInterruptsOnly(cause)
          ? Effect.failCause(cause)
          : Effect.logError("assistant.sweep_failed", { cause }).pipe(Effect.andThen(Wake.pollPause(POLL_MS)))
      ),
      Effect.forever
    )
    yield* Effect.forkScoped(loop)
  })
)
