import { useEffect, useState } from "preact/hooks"
import { api, query } from "../api.ts"
import { Empty, ErrorText, Loading, PageTitle, Section, StatusBadge, TableWrap } from "../components.tsx"
import { age, bytes } from "../format.ts"
import { useAction, useLoad } from "../hooks.ts"
import { can, useMe } from "../me.ts"
import { go, href } from "../routes.ts"
import type { Page, Session } from "../types.ts"

const NewSession = () => {
  const [ttl, setTtl] = useState("600")
  const [record, setRecord] = useState(false)
  const request = useAction()
  return (
    <form
      class="row wrap end"
      onSubmit={(e) => {
        e.preventDefault()
        void request.run(async () => {
          const created = await api.post<{ id: string }>("/v1/sessions", {
            ttl_seconds: Number(ttl),
            ...(record ? { recording: true } : {})
          })
          go({ page: "session", id: created.id })
        })
      }}
    >
      <div class="stack">
        <label for="ttl">Time to live (seconds)</label>
        <input
          id="ttl"
          type="number"
          min={60}
          max={3600}
          step={1}
          required
          value={ttl}
          onInput={(e) => setTtl(e.currentTarget.value)}
        />
      </div>
      <label class="inline">
        <input type="checkbox" checked={record} onChange={(e) => setRecord(e.currentTarget.checked)} /> Record
        this session
      </label>
      <button type="submit" disabled={request.busy}>
        {request.busy ? "Starting…" : "New session"}
      </button>
      <ErrorText message={request.error} />
    </form>
  )
}

export const Sessions = () => {
  const me = useMe()
  const [cursor, setCursor] = useState<string>()
  const first = useLoad(() => api.get<Page<Session>>(`/v1/sessions${query({ limit: "20" })}`), [])
  const more = useAction()
  const [older, setOlder] = useState<ReadonlyArray<Session>>([])
  // Open sessions change on their own: look again every few seconds while any is open.
  const open = first.data?.data.some((s) => s.status === "creating" || s.status === "ready") ?? false
  useEffect(() => {
    if (!open) return
    const timer = setInterval(first.reload, 3000)
    return () => clearInterval(timer)
  }, [open])
  useEffect(() => setCursor(first.data?.next_cursor ?? undefined), [first.data])
  const sessions = [...(first.data?.data ?? []), ...older]
  return (
    <>
      <PageTitle>Sessions</PageTitle>
      {can(me, "write") && (
        <Section title="Start a session">
          <NewSession />
        </Section>
      )}
      <Section title="Recent sessions">
        {first.data === undefined ? (
          first.error !== undefined ? (
            <ErrorText message={first.error} />
          ) : (
            <Loading what="sessions" />
          )
        ) : sessions.length === 0 ? (
          <Empty>No sessions yet. Start one here, or with the API and a key.</Empty>
        ) : (
          <TableWrap label="Sessions">
            <table>
              <thead>
                <tr>
                  <th scope="col">Session</th>
                  <th scope="col">Status</th>
                  <th scope="col">Type</th>
                  <th scope="col">Bytes</th>
                  <th scope="col">Age</th>
                  <th scope="col">Region</th>
                </tr>
              </thead>
              <tbody>
                {sessions.map((session) => (
                  <tr key={session.id}>
                    <td>
                      <a class="mono" href={href({ page: "session", id: session.id })}>
                        {session.id.slice(0, 13)}…
                      </a>
                    </td>
                    <td>
                      <StatusBadge status={session.status} />
                      {session.ended_reason !== null && <span class="muted"> {session.ended_reason}</span>}
                    </td>
                    <td>{session.session_type}</td>
                    <td>{bytes(session.bytes_up + session.bytes_down)}</td>
                    <td>{age(session.created_at)}</td>
                    <td>{session.proxy_region ?? "—"}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableWrap>
        )}
        {cursor !== undefined && (
          <button
            type="button"
            class="secondary"
            disabled={more.busy}
            onClick={() =>
              void more.run(async () => {
                const next = await api.get<Page<Session>>(`/v1/sessions${query({ limit: "20", cursor })}`)
                setOlder([...older, ...next.data])
                setCursor(next.next_cursor ?? undefined)
              })
            }
          >
            {more.busy ? "Loading…" : "Show older sessions"}
          </button>
        )}
        <ErrorText message={more.error} />
      </Section>
    </>
  )
}
