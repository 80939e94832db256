import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import * as Sql from "../db/Sql.ts"

/** The cluster's nodes as their heartbeats recorded them (`nodes`, written by `NodeLiveness`). */
export class Nodes extends Context.Service<
  Nodes,
  {
    /** Where other nodes reach `nodeId`'s HTTP server (its `NODE_URL`), if it ever beat. */
    readonly urlOf: (nodeId: string) => Effect.Effect<Option.Option<string>>
    /** `urlOf` for many, in one query: the nodes that ever beat. */
    readonly urlsOf: (nodeIds: ReadonlyArray<string>) => Effect.Effect<ReadonlyMap<string, string>>
    /** When each of `nodeIds` last beat: the nodes that ever did. */
    readonly lastSeen: (nodeIds: ReadonlyArray<string>) => Effect.Effect<ReadonlyMap<string, Date>>
    /** The nodes that beat since `cutoff`. */
    readonly liveSince: (cutoff: Date) => Effect.Effect<ReadonlyArray<string>>
    /** The nodes whose last heartbeat is older than `cutoff`: lost, unless they beat again. */
    readonly silentSince: (cutoff: Date) => Effect.Effect<ReadonlyArray<string>>
    /** Every node's HTTP server (`url`) and runner (`host:port`, once it beat with one). */
    readonly listeners: Effect.Effect<
      ReadonlyArray<{ readonly url: string; readonly runnerAddress: string | null }>
    >
  }
>()("rbs/cluster/Nodes") {
  static readonly layer = Layer.effect(
    Nodes,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const urlOf = (nodeId: string) =>
        sql<{ readonly url: string }>`SELECT url FROM nodes WHERE id = ${nodeId}`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0]?.url))
        )

      const urlsOf = (nodeIds: ReadonlyArray<string>) =>
        nodeIds.length === 0
          ? Effect.succeed(new Map<string, string>())
          : sql<{ readonly id: string; readonly url: string }>`
              SELECT id, url FROM nodes WHERE id = ANY (${nodeIds}::text[])`.pipe(
              Effect.map((rows) => new Map(rows.map((row) => [row.id, row.url])))
            )

      const lastSeen = (nodeIds: ReadonlyArray<string>) =>
        nodeIds.length === 0
          ? Effect.succeed(new Map<string, Date>())
          : sql<{ readonly id: string; readonly last_seen: Date }>`
              SELECT id, last_seen FROM nodes WHERE id = ANY (${nodeIds}::text[])`.pipe(
              Effect.map((rows) => new Map(rows.map((row) => [row.id, row.last_seen])))
            )

      const liveSince = (cutoff: Date) =>
        sql<{ readonly id: string }>`SELECT id FROM nodes WHERE last_seen > ${cutoff}`.pipe(
          Effect.map((rows) => rows.map((row) => row.id))
        )

      const silentSince = (cutoff: Date) =>
        sql<{ readonly id: string }>`SELECT id FROM nodes WHERE last_seen < ${cutoff}`.pipe(
          Effect.map((rows) => rows.map((row) => row.id))
        )

      const listeners = sql<{ readonly url: string; readonly runner_address: string | null }>`
        SELECT url, runner_address FROM nodes`.pipe(
        Effect.map((rows) => rows.map((row) => ({ url: row.url, runnerAddress: row.runner_address })))
      )

      return Nodes.of(Sql.defects({ urlOf, urlsOf, lastSeen, liveSince, silentSince, listeners }))
    })
  )
}
