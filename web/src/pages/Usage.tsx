import { api } from "../api.ts"
import { Empty, ErrorText, Loading, PageTitle, Section, TableWrap } from "../components.tsx"
import { bytes, dateTime, usd } from "../format.ts"
import { useLoad } from "../hooks.ts"
import type { Usage as UsageReport } from "../types.ts"
import { UsageChart } from "../UsageChart.tsx"

export const Usage = () => {
  const usage = useLoad(() => api.get<UsageReport>("/v1/usage"), [])
  const report = usage.data
  return (
    <>
      <PageTitle>Usage</PageTitle>
      {report === undefined ? (
        usage.error !== undefined ? (
          <ErrorText message={usage.error} />
        ) : (
          <Loading what="usage" />
        )
      ) : (
        <>
          <p class="muted">
            This month so far, {dateTime(report.from)} to {dateTime(report.to)} (UTC days).
          </p>
          <dl class="tiles">
            <div class="tile">
              <dt>Sessions</dt>
              <dd id="usage-sessions">{report.totals.sessions}</dd>
            </div>
            <div class="tile">
              <dt>Egress</dt>
              <dd id="usage-bytes">{bytes(report.totals.bytes_total)}</dd>
              <dd class="muted">
                {bytes(report.totals.bytes_up)} up · {bytes(report.totals.bytes_down)} down
              </dd>
            </div>
            <div class="tile">
              <dt>Billed</dt>
              <dd id="usage-billed">{usd(report.totals.billed_micro_usd)}</dd>
            </div>
          </dl>
          <Section title="By day">
            <UsageChart days={report.by_day} />
            <details>
              <summary>Each day as a table</summary>
              <TableWrap label="Usage by day">
                <table>
                  <thead>
                    <tr>
                      <th scope="col">Day</th>
                      <th scope="col">Sessions</th>
                      <th scope="col">Bytes</th>
                    </tr>
                  </thead>
                  <tbody>
                    {report.by_day.map((day) => (
                      <tr key={day.date}>
                        <td>{day.date}</td>
                        <td>{day.sessions}</td>
                        <td>{bytes(day.bytes_total)}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </TableWrap>
            </details>
          </Section>
          <Section title="By region">
            {report.by_region.length === 0 ? (
              <Empty>No sessions this month.</Empty>
            ) : (
              <TableWrap label="Usage by region">
                <table>
                  <thead>
                    <tr>
                      <th scope="col">Region</th>
                      <th scope="col">Sessions</th>
                      <th scope="col">Bytes</th>
                      <th scope="col">Billed</th>
                    </tr>
                  </thead>
                  <tbody>
                    {report.by_region.map((row) => (
                      <tr key={row.region}>
                        <td>{row.region}</td>
                        <td>{row.sessions}</td>
                        <td>{bytes(row.bytes_total)}</td>
                        <td>{usd(row.billed_micro_usd)}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </TableWrap>
            )}
          </Section>
          <Section title="By key">
            {report.by_key.length === 0 ? (
              <Empty>No sessions this month.</Empty>
            ) : (
              <TableWrap label="Usage by key">
                <table>
                  <thead>
                    <tr>
                      <th scope="col">Key</th>
                      <th scope="col">Sessions</th>
                      <th scope="col">Bytes</th>
                      <th scope="col">Billed</th>
                    </tr>
                  </thead>
                  <tbody>
                    {report.by_key.map((row) => (
                      <tr key={row.key_id ?? "none"}>
                        <td>
                          {row.key_id === null ? (
                            "no key (dashboard, library, or a removed key)"
                          ) : (
                            <>
                              {row.key_name} <span class="mono muted">{row.key_prefix}…</span>
                            </>
                          )}
                        </td>
                        <td>{row.sessions}</td>
                        <td>{bytes(row.bytes_total)}</td>
                        <td>{usd(row.billed_micro_usd)}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </TableWrap>
            )}
          </Section>
        </>
      )}
    </>
  )
}
