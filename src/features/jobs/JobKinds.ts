import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { Placement } from "../../platform/cluster/Placement.ts"
import { isUuid } from "../../kernel/Ids.ts"
import type { Owner } from "../../kernel/Owner.ts"
import { Audit } from "../audit/Audit.ts"
import { Sessions } from "../sessions/Sessions.ts"
import { browserJobKinds } from "./BrowserJobs.ts"
import { execJobKind } from "./ExecJob.ts"
import type { JobKind } from "./JobKind.ts"
import { workspaceJobKinds } from "../workspaces/WorkspaceJobs.ts"

/**
 * The kinds of job this service runs, by name. A library host may run its
 * own beside (or instead of) the built-in ones with `JobKinds.make`.
 */
export class JobKinds extends Context.Service<
  JobKinds,
  {
    readonly all: ReadonlyArray<JobKind>
    readonly get: (kind: string) => JobKind | undefined
  }
>()("rbs/jobs/JobKinds") {
  static readonly make = (kinds: ReadonlyArray<JobKind>) => {
    const byName = new Map(kinds.map((kind) => [kind.kind, kind]))
    return JobKinds.of({ all: kinds, get: (kind) => byName.get(kind) })
  }

  /** `screenshot`, `pdf`, `content`, `exec`, `snapshot`, `restore` (and the internal `clone`). */
  static readonly layer = Layer.effect(
    JobKinds,
    Effect.gen(function* () {
      const sessions = yield* Sessions
      const audit = yield* Audit
      const workspaces = yield* workspaceJobKinds
      const sql = yield* SqlClient.SqlClient
      const placement = yield* Placement
      const diskNode = (owner: Owner, selector: string) =>
        Effect.gen(function* () {
          const [row] = yield* sql<{ readonly node_id: string | null }>`
            SELECT node_id FROM workspaces WHERE account_id = ${owner.accountId}
              AND ${isUuid(selector) ? sql`id = ${selector}::uuid` : sql`name = ${selector}`}`.pipe(
            Effect.orDie
          )
          return row?.node_id != null && (yield* placement.isLive(row.node_id)) ? row.node_id : null
        })
      return JobKinds.make([
        ...browserJobKinds(sessions, diskNode),
        execJobKind(sessions, audit, diskNode),
        ...workspaces
      ])
    })
  )
}
