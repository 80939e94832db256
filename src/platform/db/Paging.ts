import { Effect, Schema } from "effect"
import type { SqlClient, Statement } from "effect/sql"
import { InvalidField } from "../../kernel/Errors.ts"
import { PageCursor } from "../../kernel/PageCursor.ts"

const decodeCursor = Schema.decodeUnknownEffect(PageCursor)
const encodeCursor = Schema.encodeSync(PageCursor)

/** What a newest-first list is ordered by. */
export interface PageRow {
  readonly created_at: Date
  readonly id: string
}

export interface Page<Row> {
  readonly rows: ReadonlyArray<Row>
  /** Where the next page starts (`next_cursor`); null on the last one. */
  readonly nextCursor: string | null
}

/** What `newestFirst` hands the query: the conditions to AND in, and its tail. */
export interface PageClauses {
  /** Past the cursor's row: none on the first page. */
  readonly after: ReadonlyArray<Statement.Fragment>
  /** `ORDER BY created_at DESC, id DESC LIMIT <limit + 1>`: the extra row says whether there are more. */
  readonly orderAndLimit: Statement.Fragment
}

/**
 * One page of a list ordered newest first by `(created_at, id)`, with the
 * opaque `PageCursor`: the cursor is decoded (one that is not ours, or whose
 * id is not of the list's shape, `isId`, is `InvalidField("cursor")`), `query`
 * fetches with the clauses, and the cursor of the next page is the last row's
 * when one more row came back.
 */
export const newestFirst = <Row extends PageRow, E, R>(
  sql: SqlClient.SqlClient,
  page: { readonly cursor: string | undefined; readonly limit: number },
  query: (clauses: PageClauses) => Effect.Effect<ReadonlyArray<Row>, E, R>,
  isId: (id: string) => boolean = () => true
): Effect.Effect<Page<Row>, E | InvalidField, R> =>
  Effect.gen(function* () {
    const after =
      page.cursor === undefined
        ? []
        : [
            yield* decodeCursor(page.cursor).pipe(
              Effect.filterOrFail(([, id]) => isId(id)),
              Effect.mapError(() => new InvalidField({ field: "cursor" })),
              Effect.map(([createdAt, id]) => sql`(created_at, id) < (${createdAt}, ${id})`)
            )
          ]
    const rows = yield* query({
      after,
      orderAndLimit: sql`ORDER BY created_at DESC, id DESC LIMIT ${page.limit + 1}`
    })
    const kept = rows.slice(0, page.limit)
    const last = kept[kept.length - 1]
    return {
      rows: kept,
      nextCursor:
        rows.length > page.limit && last !== undefined ? encodeCursor([last.created_at, last.id]) : null
    }
  })
