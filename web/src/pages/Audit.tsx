import { useState } from "preact/hooks"
import { api, query } from "../api.ts"
import { Empty, ErrorText, Loading, PageTitle, Section, StatusBadge, TableWrap } from "../components.tsx"
import { dateTime } from "../format.ts"
import { useLoad } from "../hooks.ts"
import type { AuditEvent, Page } from "../types.ts"

export const Audit = () => {
  const [action, setAction] = useState("")
  const [outcome, setOutcome] = useState("")
  const [filters, setFilters] = useState({ action: "", outcome: "" })
  const [cursors, setCursors] = useState<ReadonlyArray<string>>([])
  const cursor = cursors.at(-1)
  const events = useLoad(
    () => api.get<Page<AuditEvent>>(`/v1/audit/events${query({ ...filters, cursor, limit: "50" })}`),
    [filters, cursor]
  )
  return (
    <>
      <PageTitle>Audit events</PageTitle>
      <Section title="Filter">
        <form
          class="row wrap end"
          onSubmit={(e) => {
            e.preventDefault()
            setCursors([])
            setFilters({ action, outcome })
          }}
        >
          <div class="stack">
            <label for="audit-action">Action</label>
            <input
              id="audit-action"
              placeholder="api_key. or session.deleted"
              value={action}
              onInput={(e) => setAction(e.currentTarget.value)}
            />
          </div>
          <div class="stack">
            <label for="audit-outcome">Outcome</label>
            <select id="audit-outcome" value={outcome} onChange={(e) => setOutcome(e.currentTarget.value)}>
              <option value="">any</option>
              <option value="success">success</option>
              <option value="failure">failure</option>
            </select>
          </div>
          <button type="submit">Apply</button>
        </form>
      </Section>
      <Section title="Events">
        {events.data === undefined ? (
          events.error !== undefined ? (
            <ErrorText message={events.error} />
          ) : (
            <Loading what="audit events" />
          )
        ) : events.data.data.length === 0 ? (
          <Empty>No events match.</Empty>
        ) : (
          <TableWrap label="Audit events">
            <table>
              <thead>
                <tr>
                  <th scope="col">When</th>
                  <th scope="col">Action</th>
                  <th scope="col">Outcome</th>
                  <th scope="col">Actor</th>
                  <th scope="col">Target</th>
                  <th scope="col">IP</th>
                </tr>
              </thead>
              <tbody>
                {events.data.data.map((event) => (
                  <tr key={event.id}>
                    <td>{dateTime(event.occurred_at)}</td>
                    <td class="mono">{event.action}</td>
                    <td>
                      <StatusBadge status={event.outcome} />
                    </td>
                    <td>
                      {event.actor.type}
                      {event.actor.id === null ? (
                        ""
                      ) : (
                        <span class="mono muted"> {event.actor.id.slice(0, 8)}</span>
                      )}
                    </td>
                    <td>
                      {event.target.type}
                      {event.target.id === null ? (
                        ""
                      ) : (
                        <span class="mono muted"> {event.target.id.slice(0, 18)}</span>
                      )}
                    </td>
                    <td class="mono">{event.ip ?? "—"}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableWrap>
        )}
        {events.error !== undefined && events.data !== undefined && <ErrorText message={events.error} />}
        <div class="row">
          {cursors.length > 0 && (
            <button type="button" class="secondary" onClick={() => setCursors(cursors.slice(0, -1))}>
              Newer events
            </button>
          )}
          {events.data?.next_cursor != null && (
            <button
              type="button"
              class="secondary"
              onClick={() => setCursors([...cursors, events.data!.next_cursor!])}
            >
              Older events
            </button>
          )}
        </div>
      </Section>
    </>
  )
}
