import { Clock, Context, Effect, Layer } from "effect"
import * as Sql from "../../platform/db/Sql.ts"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { Audit } from "../audit/Audit.ts"
import {
  AssistantConflict,
  type AssistantInfo,
  AssistantNotFound,
  type CreateAssistantRequest,
  MAX_STATE_BYTES,
  type PatchAssistantRequest,
  PreconditionFailed,
  type RuntimeState
} from "../../kernel/Assistant.ts"
import { InvalidField, type ResourceLimitReached } from "../../kernel/Errors.ts"
import type { Owner } from "../../kernel/Owner.ts"
import { isSlug } from "../../kernel/Workspace.ts"
import { WorkspaceStore } from "../workspaces/WorkspaceStore.ts"
import { SessionKinds } from "../../runtime/SessionKinds.ts"
import {
  type AssistantRow,
  checkConfig,
  findAssistantRow,
  jsonBytes,
  toAssistantInfo,
  withLinks
} from "./AssistantRows.ts"
import { wakeSupervisor } from "./AssistantWake.ts"

export interface StateWrite {
  readonly ifMatch: string | undefined
}

/**
 * Assistants: agents with a home workspace whose runtime runs in a sandbox
 * session on it (started and kept up by `AssistantSupervisor`). Records,
 * and the runtime's state (the vault: `AssistantVault`).
 */
export class Assistants extends Context.Service<
  Assistants,
  {
    readonly create: (
      owner: Owner,
      input: CreateAssistantRequest
    ) => Effect.Effect<AssistantInfo, InvalidField | AssistantConflict | ResourceLimitReached>
    readonly list: (owner: Owner) => Effect.Effect<ReadonlyArray<AssistantInfo>>
    readonly get: (owner: Owner, id: string) => Effect.Effect<AssistantInfo, AssistantNotFound>
    readonly patch: (
      owner: Owner,
      id: string,
      input: PatchAssistantRequest
    ) => Effect.Effect<AssistantInfo, AssistantNotFound | InvalidField | AssistantConflict>
    /** Marks it paused (its runtime's token stops at once); the session it ran in, to end. */
    readonly pause: (
      owner: Owner,
      id: string
    ) => Effect.Effect<
      { readonly assistant: AssistantInfo; readonly endSession: string | null },
      AssistantNotFound
    >
    readonly resume: (owner: Owner, id: string) => Effect.Effect<AssistantInfo, AssistantNotFound>
    readonly getState: (
      owner: Owner,
      id: string
    ) => Effect.Effect<
      { readonly state: Record<string, unknown>; readonly version: number; readonly updated_at: Date },
      AssistantNotFound
    >
    readonly putState: (
      owner: Owner,
      id: string,
      input: RuntimeState,
      write: StateWrite
    ) => Effect.Effect<
      { readonly state: Record<string, unknown>; readonly version: number; readonly updated_at: Date },
      AssistantNotFound | InvalidField | PreconditionFailed
    >
  }
>()("rbs/assistants/Assistants") {
  static readonly layer = Layer.effect(
    Assistants,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const audit = yield* Audit
      const workspaces = yield* WorkspaceStore
      // An assistant's runtime runs in a sandbox session: its image is one a sandbox can run.
      const sandboxes = (yield* SessionKinds).ofRow({ session_type: "sandbox", isolation: "browser" })
      const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

      const findRow = findAssistantRow(sql)

      const checkImage = (image: string | null | undefined) =>
        image === null || image === undefined
          ? Effect.void
          : Effect.flatMap(sandboxes.imageExists(image), (exists) =>
              exists ? Effect.void : Effect.fail(new InvalidField({ field: "image" }))
            )

      const create = Effect.fn("Assistants.create")(function* (owner: Owner, input: CreateAssistantRequest) {
        if (!isSlug(input.name)) return yield* new InvalidField({ field: "name" })
        const config = input.config ?? {}
        yield* checkConfig(config)
        yield* checkImage(input.image)
        const id = Crypto.randomUUID()
        const workspaceId = Crypto.randomUUID()
        const at = yield* now
        const created = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              // Its home, made by the workspaces' owner in this transaction (it counts in the account's workspaces).
              yield* workspaces.createHome({
                id: workspaceId,
                accountId: owner.accountId,
                name: `assistant-${input.name}-${workspaceId.slice(0, 6)}`,
                image: input.image ?? null,
                at
              })
              const rows = yield* sql<AssistantRow>`
                INSERT INTO assistants (id, account_id, name, image, config, status, workspace_id,
                  created_at, updated_at)
                VALUES (${id}, ${owner.accountId}, ${input.name}, ${input.image ?? null},
                  ${JSON.stringify(config)}::jsonb, 'running', ${workspaceId}, ${at}, ${at})
                ON CONFLICT (account_id, name) DO NOTHING RETURNING *`
              // Taken: nothing of it is kept (the workspace goes with the transaction).
              if (rows[0] === undefined) return yield* Effect.fail("taken" as const)
              yield* audit.record(owner, {
                action: "assistant.created",
                targetType: "assistant",
                targetId: id,
                details: { name: input.name, workspace_id: workspaceId }
              })
              // Its runtime is to start: the sweeps look at once.
              yield* wakeSupervisor(sql)
              return rows[0]
            })
          )
          .pipe(
            Effect.catchTag("SqlError", Effect.die),
            Effect.catchIf(
              (failure) => failure === "taken",
              () =>
                Effect.fail(
                  new AssistantConflict({ detail: `An assistant named ${input.name} exists already.` })
                )
            )
          )
        return toAssistantInfo(created)
      })

      const list = (owner: Owner) =>
        sql<AssistantRow>`
          SELECT ${withLinks(sql)} FROM assistants a WHERE a.account_id = ${owner.accountId}
            ${owner.principal._tag === "Assistant" ? sql`AND a.id = ${owner.principal.assistantId}` : sql``}
          ORDER BY a.created_at DESC, a.id DESC`.pipe(
          Sql.orDefect,
          Effect.map((rows) => rows.map(toAssistantInfo))
        )

      const patch = Effect.fn("Assistants.patch")(function* (
        owner: Owner,
        id: string,
        input: PatchAssistantRequest
      ) {
        yield* findRow(owner, id)
        if (input.name !== undefined && !isSlug(input.name)) return yield* new InvalidField({ field: "name" })
        if (input.config !== undefined) yield* checkConfig(input.config)
        yield* checkImage(input.image)
        const at = yield* now
        const rows = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const updated = yield* sql<AssistantRow>`
                UPDATE assistants SET
                  name = coalesce(${input.name ?? null}, name),
                  image = ${input.image === undefined ? sql`image` : input.image},
                  config = coalesce(${input.config === undefined ? null : JSON.stringify(input.config)}::jsonb, config),
                  config_version = config_version + ${input.config === undefined ? 0 : 1},
                  updated_at = ${at}
                WHERE id = ${id} AND account_id = ${owner.accountId} RETURNING *`
              yield* audit.record(owner, {
                action: "assistant.updated",
                targetType: "assistant",
                targetId: id,
                details: { fields: Object.keys(input) }
              })
              return updated
            })
          )
          .pipe(
            Effect.catchTag("SqlError", (error) =>
              error.reason._tag === "UniqueViolation" &&
              error.reason.constraint === "assistants_account_id_name_key"
                ? Effect.fail(
                    new AssistantConflict({ detail: `An assistant named ${input.name} exists already.` })
                  )
                : Effect.die(error)
            )
          )
        if (rows[0] === undefined) return yield* new AssistantNotFound()
        return toAssistantInfo(yield* findRow(owner, id))
      })

      /** Running or paused, audited; the row as it then is and the session it had. */
      const setStatus = (owner: Owner, id: string, status: "running" | "paused") =>
        Effect.gen(function* () {
          const { links } = yield* findRow(owner, id)
          const at = yield* now
          return yield* sql
            .withTransaction(
              Effect.gen(function* () {
                const [before] = yield* sql<{ readonly session_id: string | null }>`
                  SELECT session_id FROM assistants WHERE id = ${id} FOR UPDATE`
                const [row] = yield* sql<AssistantRow>`
                  UPDATE assistants SET status = ${status}, updated_at = ${at},
                    session_id = ${status === "paused" ? null : sql`session_id`},
                    last_error = ${status === "running" ? null : sql`last_error`}
                  WHERE id = ${id} RETURNING *`
                yield* audit.record(owner, {
                  action: status === "paused" ? "assistant.paused" : "assistant.resumed",
                  targetType: "assistant",
                  targetId: id
                })
                // A resume needs its runtime started; a pause ends its session itself (the caller).
                if (status === "running") yield* wakeSupervisor(sql)
                return { row: { ...row!, links: links ?? [] }, session: before?.session_id ?? null }
              })
            )
            .pipe(Sql.orDefect)
        })

      const stateOf = (row: Pick<AssistantRow, "runtime_state" | "state_version" | "updated_at">) => ({
        state: row.runtime_state,
        version: Number(row.state_version),
        updated_at: row.updated_at
      })

      const putState = Effect.fn("Assistants.putState")(function* (
        owner: Owner,
        id: string,
        input: RuntimeState,
        write: StateWrite
      ) {
        yield* findRow(owner, id)
        if (jsonBytes(input.state) > MAX_STATE_BYTES) return yield* new InvalidField({ field: "state" })
        // `If-Match: "<version>"` (or `*`): the write lands only on that version.
        const expected =
          write.ifMatch === undefined || write.ifMatch.trim() === "*"
            ? undefined
            : Number(/^(?:W\/)?"?(\d+)"?$/.exec(write.ifMatch.trim())?.[1] ?? Number.NaN)
        if (expected !== undefined && !Number.isSafeInteger(expected)) return yield* new PreconditionFailed()
        const at = yield* now
        const [row] = yield* sql<AssistantRow>`
          UPDATE assistants SET runtime_state = ${JSON.stringify(input.state)}::jsonb,
            state_version = state_version + 1, updated_at = ${at}
          WHERE id = ${id} AND account_id = ${owner.accountId}
            ${expected === undefined ? sql`` : sql`AND state_version = ${expected}`}
          RETURNING runtime_state, state_version, updated_at`.pipe(Sql.orDefect)
        if (row === undefined) return yield* new PreconditionFailed()
        return stateOf(row)
      })

      return Assistants.of({
        create,
        list,
        get: (owner, id) => Effect.map(findRow(owner, id), toAssistantInfo),
        patch,
        pause: (owner, id) =>
          Effect.map(setStatus(owner, id, "paused"), ({ row, session }) => ({
            assistant: toAssistantInfo(row),
            endSession: session
          })),
        resume: (owner, id) => Effect.map(setStatus(owner, id, "running"), ({ row }) => toAssistantInfo(row)),
        getState: (owner, id) => Effect.map(findRow(owner, id), stateOf),
        putState
      })
    })
  )
}
