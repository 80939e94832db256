import { Clock, Effect, Option, Stream } from "effect"
import { HttpServerResponse } from "effect/http"
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

/** A cursor is an event's id: a whole number from 0 (nine digits at most: a log holds 50,000). */
const cursorOf = (cursor: string | undefined) =>
  cursor === undefined
    ? Effect.succeed(0)
    : /^\d{1,9}$/.test(cursor)
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

/** How often the live stream looks for new events (they are written every half second). */
const STREAM_POLL_MS = 500
/** Events the stream reads at once. */
const STREAM_PAGE = 500
/** A comment this often while nothing comes, so proxies keep the connection. */
const KEEP_ALIVE_MS = 15_000
/** How long past its session's end the stream waits for a log's last write, before ending it as it is. */
const LAST_WRITE_WAIT_MS = 15_000

const sse = (event: LogEvent) => `id: ${event.id}\nevent: ${event.kind}\ndata: ${JSON.stringify(event)}\n\n`
const encoder = new TextEncoder()

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
      .handleRaw("stream", ({ params, query, headers }) =>
        Effect.gen(function* () {
          const o = yield* owner
          const session = yield* sessions.get(o, params.id)
          const after = yield* cursorOf(headers["last-event-id"] ?? query.after)
          const kinds = yield* kindsOf(query.kind)
          const end = (complete: boolean) => `event: end\ndata: ${JSON.stringify({ complete })}\n\n`
          interface State {
            readonly after: number
            readonly quietSince: number
            readonly endedAt: number | undefined
          }
          const step = (state: State) =>
            Effect.gen(function* () {
              const read = yield* logs.read(params.id, {
                after: state.after,
                limit: STREAM_PAGE,
                kinds,
                since: undefined,
                until: undefined
              })
              const now = yield* Clock.currentTimeMillis
              const last = read.events.at(-1)?.id ?? state.after
              if (read.events.length > 0) {
                const next = { after: last, quietSince: now, endedAt: state.endedAt }
                return [[read.events.map(sse).join("")], Option.some(next)] as const
              }
              if (read.complete) return [[end(true)], Option.none()] as const
              // Nothing new: is the session still going? (read from its row, as any node can)
              let endedAt = state.endedAt
              if (endedAt === undefined) {
                const now_ = yield* sessions.get(o, params.id)
                if (now_.status === "closed" || now_.status === "error") endedAt = now
              }
              if (endedAt !== undefined && now - endedAt > LAST_WRITE_WAIT_MS)
                return [[end(false)], Option.none()] as const
              yield* Effect.sleep(STREAM_POLL_MS)
              const quiet = now - state.quietSince >= KEEP_ALIVE_MS
              return [
                quiet ? [": keep-alive\n\n"] : [],
                Option.some({ after: last, quietSince: quiet ? now : state.quietSince, endedAt })
              ] as const
            })
          const body = session.logs
            ? Stream.paginate<State, string, never, never>(
                { after, quietSince: yield* Clock.currentTimeMillis, endedAt: undefined },
                (state) =>
                  step(state).pipe(
                    Effect.map(([chunks, next]) => [chunks, next] as const),
                    Effect.orDie
                  )
              )
            : Stream.make(end(false))
          return HttpServerResponse.stream(
            Stream.map(body, (text) => encoder.encode(text)),
            {
              contentType: "text/event-stream",
              headers: { "cache-control": "no-cache", "x-accel-buffering": "no" }
            }
          )
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
