import { useEffect, useRef, useState } from "preact/hooks"
import { api } from "./api.ts"
import { ErrorText } from "./components.tsx"
import { messageOf } from "./hooks.ts"

// A session's log beside its live view and recording: what its pages and clients did, newest last,
// followed while the session runs; an event's time moves the recording there.

interface LogEvent {
  readonly id: number
  readonly at: string
  readonly kind: string
  readonly data: Record<string, any>
}

interface LogPage {
  readonly data: ReadonlyArray<LogEvent>
  readonly next_cursor: string | null
  readonly has_more: boolean
  readonly logs: boolean
  readonly complete: boolean
}

/** The most events the panel keeps; older ones are left to the API (and the HAR). */
const SHOWN = 2_000

const KINDS = ["all", "request", "console", "page_error", "navigation", "tabs", "clients"] as const
type Filter = (typeof KINDS)[number]

const matches = (filter: Filter, kind: string) =>
  filter === "all" ||
  kind === filter ||
  (filter === "tabs" && kind.startsWith("target_")) ||
  (filter === "clients" && kind.startsWith("client_"))

/** One line of an event, in words. */
const summary = (event: LogEvent) => {
  const d = event.data
  switch (event.kind) {
    case "request":
      return `${d.method} ${d.url} → ${d.status ?? d.failure ?? "?"}${d.refused_by_proxy ? ` (refused: ${d.refused_by_proxy})` : ""}`
    case "console":
      return `[${d.level}] ${d.text}`
    case "page_error":
      return d.message
    case "navigation":
      return `→ ${d.url}`
    case "target_created":
      return `tab opened ${d.url}`
    case "target_closed":
      return "tab closed"
    case "egress_refused":
      return `refused ${d.host}:${d.port} (${d.reason})`
    case "client_connected":
      return `${d.connection} client connected`
    case "client_disconnected":
      return `${d.connection} client left after ${(d.duration_ms / 1000).toFixed(1)} s`
    case "session_ended":
      return `session ended: ${d.reason}`
    default:
      return JSON.stringify(d)
  }
}

/** The session's HAR as a file, fetched with the dashboard's account (an organization's header included). */
const downloadHar = async (sessionId: string) => {
  const url = URL.createObjectURL(await api.blob(`/v1/sessions/${sessionId}/har`))
  const link = document.createElement("a")
  link.href = url
  link.download = `${sessionId}.har`
  link.click()
  setTimeout(() => URL.revokeObjectURL(url), 10_000)
}

export const SessionLog = ({
  sessionId,
  startedAt,
  onSeek
}: {
  readonly sessionId: string
  /** When the recording starts (the session's `ready_at`): an event's offset into it. */
  readonly startedAt: string | null
  /** Moves the recording to `seconds`; absent while there is no recording to move. */
  readonly onSeek?: ((seconds: number) => void) | undefined
}) => {
  const [events, setEvents] = useState<ReadonlyArray<LogEvent>>([])
  const [state, setState] = useState<{ logs: boolean; complete: boolean }>({ logs: true, complete: false })
  const [error, setError] = useState<string>()
  const [filter, setFilter] = useState<Filter>("all")
  const cursor = useRef<string | null>(null)

  useEffect(() => {
    let live = true
    let timer: ReturnType<typeof setTimeout> | undefined
    cursor.current = null
    setEvents([])
    const poll = async () => {
      try {
        const after = cursor.current === null ? "" : `&cursor=${cursor.current}`
        const page = await api.get<LogPage>(`/v1/sessions/${sessionId}/logs?limit=1000${after}`)
        if (!live) return
        setError(undefined)
        if (page.data.length > 0) setEvents((shown) => [...shown, ...page.data].slice(-SHOWN))
        if (page.next_cursor !== null) cursor.current = page.next_cursor
        setState({ logs: page.logs, complete: page.complete })
        // The rest of a long log at once; a running session's new events every second.
        if (page.has_more) timer = setTimeout(poll, 0)
        else if (page.logs && !page.complete) timer = setTimeout(poll, 1000)
      } catch (failure) {
        if (!live) return
        setError(messageOf(failure))
        timer = setTimeout(poll, 3000)
      }
    }
    void poll()
    return () => {
      live = false
      if (timer !== undefined) clearTimeout(timer)
    }
  }, [sessionId])

  if (!state.logs) return <p class="muted">This session keeps no log (created with logs: false).</p>
  const start = startedAt === null ? undefined : Date.parse(startedAt)
  const shown = events.filter((event) => matches(filter, event.kind))
  return (
    <div class="stack">
      <div class="row wrap">
        <label>
          Show{" "}
          <select value={filter} onChange={(e) => setFilter((e.target as HTMLSelectElement).value as Filter)}>
            {KINDS.map((kind) => (
              <option value={kind}>{kind.replace("_", " ")}</option>
            ))}
          </select>
        </label>
        <button
          type="button"
          onClick={() => void downloadHar(sessionId).catch((e) => setError(messageOf(e)))}
        >
          Download the HAR
        </button>
        <span class="muted" role="status">
          {events.length} events{state.complete ? "" : " · following"}
        </span>
      </div>
      <ErrorText message={error} />
      <ol class="session-log" aria-label="Session log">
        {shown.map((event) => {
          const offset = start === undefined ? 0 : Math.max(0, (Date.parse(event.at) - start) / 1000)
          return (
            <li key={event.id} class={`log-${event.kind}`}>
              {onSeek === undefined ? (
                <span class="mono log-time">{offset.toFixed(1)} s</span>
              ) : (
                <button
                  type="button"
                  class="link mono log-time"
                  aria-label={`${offset.toFixed(1)} s: move the recording there`}
                  onClick={() => onSeek(offset)}
                >
                  {offset.toFixed(1)} s
                </button>
              )}{" "}
              <span class="log-kind">{event.kind.replace("_", " ")}</span>{" "}
              <span class="log-text break">{summary(event)}</span>
            </li>
          )
        })}
      </ol>
    </div>
  )
}
