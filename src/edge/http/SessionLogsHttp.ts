import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "./Api.ts"
import { CurrentOwner } from "../../features/policy/AuthMiddleware.ts"
import { InvalidField } from "../../kernel/Errors.ts"
import { LOG_KINDS, type LogEvent } from "../../kernel/SessionLog.ts"
import { SessionLogs } from "../../features/logs/SessionLogs.ts"
import { LOG_PAGE_DEFAULT } from "../../features/logs/SessionLogsApi.ts"
import { toHar } from "../../features/logs/Har.ts"
import { Sessions } from "../../features/sessions/Sessions.ts"

const owner = Effect.service(CurrentOwner)

const KINDS: ReadonlySet<string> = new Set(LOG_KINDS)

/** A cursor is an event's id: a whole number from 0. */
const cursorOf = (cursor: string | undefined) =>
  cursor === undefined
    ? Effect.succeed(0)
    : /^\d{1,10}$/.test(cursor)
      ? Effect.succeed(Number(cursor))
      : Effect.fail(new InvalidField({ field: "cursor" }))

const timeOf = (field: "since" | "until", value: string | undefined) => {
  if (value === undefined) return Effect.succeed(undefined)
  const at = new Date(value)
  return Number.isNaN(at.getTime()) ? Effect.fail(new InvalidField({ field })) : Effect.succeed(at)
}

const kindsOf = (kind: string | undefined) => {
  if (kind === undefined) return Effect.succeed(undefined)
  const kinds = kind.split(",").map((each) => each.trim())
  return kinds.every((each) => KINDS.has(each))
    ? Effect.succeed(kinds)
    : Effect.fail(new InvalidField({ field: "kind" }))
}

/** Request events of a HAR: read in pages, a session's log is bounded (`MAX_LOG_EVENTS`). */
const HAR_PAGE = 1000

export const SessionLogsHttp = HttpApiBuilder.group(
  Api,
  "logs",
  Effect.fn(function* (handlers) {
    const sessions = yield* Sessions
    const logs = yield* SessionLogs
    return handlers
      .handle("list", ({ params, query }) =>
        Effect.gen(function* () {
          // The owner's session, or 404: its log is read only then.
          const session = yield* sessions.get(yield* owner, params.id)
          const after = yield* cursorOf(query.cursor)
          const kinds = yield* kindsOf(query.kind)
          const since = yield* timeOf("since", query.since)
          const until = yield* timeOf("until", query.until)
          const limit = query.limit ?? LOG_PAGE_DEFAULT
          if (!session.logs)
            return {
              object: "list",
              data: [],
              next_cursor: null,
              has_more: false,
              logs: false,
              complete: true
            } as const
          const read = yield* logs.read(params.id, { after, limit, kinds, since, until })
          const last = read.events.at(-1)?.id ?? after
          const ended = session.status === "closed" || session.status === "error"
          return {
            object: "list",
            data: read.events,
            // While it runs the log grows: its end is where the next events will come.
            next_cursor: read.more || !(ended && read.complete) ? String(last) : null,
            has_more: read.more,
            logs: true,
            complete: read.complete
          } as const
        })
      )
      .handle("har", ({ params }) =>
        Effect.gen(function* () {
          const session = yield* sessions.get(yield* owner, params.id)
          const events: Array<LogEvent> = []
          let after = 0
          while (session.logs) {
            const read = yield* logs.read(params.id, {
              after,
              limit: HAR_PAGE,
              kinds: ["request"],
              since: undefined,
              until: undefined
            })
            events.push(...read.events)
            if (!read.more) break
            after = read.events.at(-1)!.id
          }
          return toHar(
            events,
            "1.0.0",
            `Session ${params.id} (${session.status}${session.logs ? "" : ", created with logs: false"})`
          ) as Record<string, any>
        })
      )
  })
)
