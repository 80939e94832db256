import { useState } from "preact/hooks"
import { api } from "../api.ts"
import { Empty, ErrorText, Loading, PageTitle, Section, TableWrap } from "../components.tsx"
import { dateTime, usd } from "../format.ts"
import { useAction, useLoad } from "../hooks.ts"
import { can, useMe } from "../me.ts"
import type { BillingSummary } from "../types.ts"

const TopUp = () => {
  const [amount, setAmount] = useState("10")
  const request = useAction()
  return (
    <form
      class="row wrap end"
      onSubmit={(e) => {
        e.preventDefault()
        void request.run(async () => {
          const { checkout_url } = await api.post<{ checkout_url: string }>("/v1/billing/topup", {
            amount_usd: Number(amount)
          })
          // The payment provider's page: this service's own checkout, or Stripe's.
          location.assign(checkout_url)
        })
      }}
    >
      <div class="stack">
        <label for="amount">Amount (USD)</label>
        <input
          id="amount"
          type="number"
          min={10}
          step={1}
          required
          aria-describedby="amount-hint"
          value={amount}
          onInput={(e) => setAmount(e.currentTarget.value)}
        />
      </div>
      <button type="submit" disabled={request.busy}>
        {request.busy ? "Opening checkout…" : "Top up"}
      </button>
      <p id="amount-hint" class="muted grow-line">
        Whole dollars, 10 or more. You pay on the next page.
      </p>
      <ErrorText message={request.error} />
    </form>
  )
}

const Threshold = ({ current, onSaved }: { readonly current: number; readonly onSaved: () => void }) => {
  const [value, setValue] = useState(String(current / 1_000_000))
  const save = useAction()
  const [saved, setSaved] = useState(false)
  return (
    <form
      class="row wrap end"
      onSubmit={(e) => {
        e.preventDefault()
        setSaved(false)
        void save.run(async () => {
          await api.post("/v1/billing/alerts", { low_balance_threshold_usd: Number(value) })
          setSaved(true)
          onSaved()
        })
      }}
    >
      <div class="stack">
        <label for="threshold">Low-balance alert below (USD)</label>
        <input
          id="threshold"
          type="number"
          min={0}
          step="0.01"
          required
          value={value}
          onInput={(e) => setValue(e.currentTarget.value)}
        />
      </div>
      <button type="submit" class="secondary" disabled={save.busy}>
        Save threshold
      </button>
      <p role="status" class="muted">
        {saved
          ? "Saved."
          : "A balance.low webhook event is sent when a charge takes the balance below it; 0 turns it off."}
      </p>
      <ErrorText message={save.error} />
    </form>
  )
}

export const Billing = () => {
  const me = useMe()
  const summary = useLoad(() => api.get<BillingSummary>("/v1/billing/summary"), [])
  const data = summary.data
  return (
    <>
      <PageTitle>Billing</PageTitle>
      {data === undefined ? (
        summary.error !== undefined ? (
          <ErrorText message={summary.error} />
        ) : (
          <Loading what="your balance" />
        )
      ) : (
        <>
          <dl class="tiles">
            <div class="tile">
              <dt>Balance</dt>
              <dd id="balance" class={data.balance_micro_usd <= 0 ? "bad-text" : ""}>
                {usd(data.balance_micro_usd)}
              </dd>
            </div>
            <div class="tile">
              <dt>Egress price</dt>
              <dd>${data.egress_price.usd_per_gb} per GB</dd>
            </div>
          </dl>
          {data.balance_micro_usd <= 0 && (
            <p class="error" role="alert">
              The balance is used up: new sessions are refused until a top-up.
            </p>
          )}
          {can(me, "admin") && (
            <Section title="Top up">
              <TopUp />
            </Section>
          )}
          {can(me, "admin") && (
            <Section title="Alerts">
              <Threshold current={data.low_balance_threshold_micro_usd} onSaved={summary.reload} />
            </Section>
          )}
          <Section title="Ledger">
            {data.recent_entries.length === 0 ? (
              <Empty>No entries yet.</Empty>
            ) : (
              <TableWrap label="Ledger">
                <table>
                  <caption class="visually-hidden">The 20 most recent ledger entries</caption>
                  <thead>
                    <tr>
                      <th scope="col">When</th>
                      <th scope="col">Kind</th>
                      <th scope="col">Description</th>
                      <th scope="col" class="num">
                        Amount
                      </th>
                      <th scope="col" class="num">
                        Balance after
                      </th>
                    </tr>
                  </thead>
                  <tbody>
                    {data.recent_entries.map((entry) => (
                      <tr key={entry.id}>
                        <td>{dateTime(entry.created_at)}</td>
                        <td>{entry.kind}</td>
                        <td>{entry.description}</td>
                        <td class="num">{usd(entry.amount_micro_usd)}</td>
                        <td class="num">{usd(entry.balance_after_micro_usd)}</td>
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
