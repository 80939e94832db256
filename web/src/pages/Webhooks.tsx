import { useState } from "preact/hooks"
import { api, query } from "../api.ts"
import {
  Empty,
  ErrorText,
  Loading,
  PageTitle,
  SecretOnce,
  Section,
  StatusBadge,
  TableWrap
} from "../components.tsx"
import { dateTime } from "../format.ts"
import { useAction, useLoad } from "../hooks.ts"
import { can, useMe } from "../me.ts"
import type { Delivery, Page, Webhook } from "../types.ts"

interface WebhookList {
  readonly supported_events: ReadonlyArray<string>
  readonly webhooks: ReadonlyArray<Webhook>
}

type Shown = { readonly url: string; readonly secret: string }

const CreateWebhook = ({
  events,
  onCreated
}: {
  readonly events: ReadonlyArray<string>
  readonly onCreated: (shown: Shown) => void
}) => {
  const [url, setUrl] = useState("")
  const [description, setDescription] = useState("")
  const [chosen, setChosen] = useState<ReadonlyArray<string>>([])
  const request = useAction()
  return (
    <form
      class="stack"
      onSubmit={(e) => {
        e.preventDefault()
        void request.run(async () => {
          const created = await api.post<Webhook & { signing_secret: string }>("/v1/webhooks", {
            url,
            events: chosen,
            ...(description === "" ? {} : { description })
          })
          setUrl("")
          setDescription("")
          setChosen([])
          onCreated({ url: created.url, secret: created.signing_secret })
        })
      }}
    >
      <label for="webhook-url">Endpoint URL</label>
      <input
        id="webhook-url"
        type="url"
        required
        placeholder="https://example.com/hooks"
        value={url}
        onInput={(e) => setUrl(e.currentTarget.value)}
      />
      <label for="webhook-description">Description (optional)</label>
      <input
        id="webhook-description"
        maxLength={200}
        value={description}
        onInput={(e) => setDescription(e.currentTarget.value)}
      />
      <fieldset>
        <legend>Events</legend>
        <div class="checks">
          {events.map((event) => (
            <label class="inline" key={event}>
              <input
                type="checkbox"
                checked={chosen.includes(event)}
                onChange={() =>
                  setChosen(chosen.includes(event) ? chosen.filter((e) => e !== event) : [...chosen, event])
                }
              />{" "}
              <span class="mono">{event}</span>
            </label>
          ))}
        </div>
      </fieldset>
      <ErrorText message={request.error} />
      <div>
        <button type="submit" disabled={request.busy || chosen.length === 0}>
          {request.busy ? "Adding…" : "Add webhook"}
        </button>
      </div>
    </form>
  )
}

const Deliveries = ({ webhooks }: { readonly webhooks: ReadonlyArray<Webhook> }) => {
  const me = useMe()
  const [state, setState] = useState("")
  const [cursor, setCursor] = useState<string>()
  const list = useLoad(
    () => api.get<Page<Delivery>>(`/v1/webhooks/deliveries${query({ state, cursor, limit: "25" })}`),
    [state, cursor]
  )
  const action = useAction()
  const urlOf = (id: string) => webhooks.find((w) => w.id === id)?.url ?? id
  return (
    <>
      <div class="row wrap end">
        <div class="stack">
          <label for="delivery-state">State</label>
          <select
            id="delivery-state"
            value={state}
            onChange={(e) => {
              setCursor(undefined)
              setState(e.currentTarget.value)
            }}
          >
            <option value="">all</option>
            {["pending", "delivering", "succeeded", "failed", "discarded"].map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </div>
        <button type="button" class="secondary" onClick={list.reload}>
          Refresh
        </button>
      </div>
      <ErrorText message={action.error} />
      {list.data === undefined ? (
        list.error !== undefined ? (
          <ErrorText message={list.error} />
        ) : (
          <Loading what="deliveries" />
        )
      ) : list.data.data.length === 0 ? (
        <Empty>No deliveries{state === "" ? " yet" : ` in state ${state}`}.</Empty>
      ) : (
        <TableWrap label="Deliveries">
          <table>
            <thead>
              <tr>
                <th scope="col">Event</th>
                <th scope="col">Endpoint</th>
                <th scope="col">State</th>
                <th scope="col">Attempts</th>
                <th scope="col">Last answer</th>
                <th scope="col">Created</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {list.data.data.map((delivery) => (
                <tr key={delivery.id}>
                  <td class="mono">{delivery.event_type}</td>
                  <td class="ellipsis">{urlOf(delivery.webhook_id)}</td>
                  <td>
                    <StatusBadge status={delivery.state} />
                  </td>
                  <td>{delivery.attempts}</td>
                  <td>{delivery.last_status ?? "—"}</td>
                  <td>{dateTime(delivery.created_at)}</td>
                  <td>
                    {can(me, "admin") && (
                      <div class="row wrap">
                        <button
                          type="button"
                          class="secondary"
                          disabled={action.busy}
                          onClick={() =>
                            void action.run(() =>
                              api.post(`/v1/webhooks/deliveries/${delivery.id}/replay`).then(list.reload)
                            )
                          }
                        >
                          Replay
                        </button>
                        {(delivery.state === "pending" || delivery.state === "failed") && (
                          <button
                            type="button"
                            class="secondary"
                            disabled={action.busy}
                            onClick={() =>
                              void action.run(() =>
                                api.post(`/v1/webhooks/deliveries/${delivery.id}/discard`).then(list.reload)
                              )
                            }
                          >
                            Discard
                          </button>
                        )}
                      </div>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      )}
      {list.data?.next_cursor != null && (
        <button type="button" class="secondary" onClick={() => setCursor(list.data!.next_cursor!)}>
          Older deliveries
        </button>
      )}
    </>
  )
}

export const Webhooks = () => {
  const me = useMe()
  const list = useLoad(() => api.get<WebhookList>("/v1/webhooks"), [])
  const action = useAction()
  const [shown, setShown] = useState<Shown>()
  const reveal = (next: Shown) => {
    setShown(next)
    list.reload()
  }
  return (
    <>
      <PageTitle>Webhooks</PageTitle>
      <p class="muted">
        Events are signed per Standard Webhooks (<code>webhook-id</code>, <code>webhook-timestamp</code>,{" "}
        <code>webhook-signature</code>) with the endpoint's signing secret, and retried for about a day.
      </p>
      {shown !== undefined && (
        <SecretOnce
          title={`Signing secret for ${shown.url}`}
          secret={shown.secret}
          onDone={() => setShown(undefined)}
        />
      )}
      {list.data === undefined ? (
        list.error !== undefined ? (
          <ErrorText message={list.error} />
        ) : (
          <Loading what="webhooks" />
        )
      ) : (
        <>
          {can(me, "admin") && (
            <Section title="Add a webhook">
              <CreateWebhook events={list.data.supported_events} onCreated={reveal} />
            </Section>
          )}
          <Section title="Endpoints">
            <ErrorText message={action.error} />
            {list.data.webhooks.length === 0 ? (
              <Empty>No webhooks yet.</Empty>
            ) : (
              <ul class="plain">
                {list.data.webhooks.map((hook) => (
                  <li key={hook.id} class="item">
                    <div class="grow">
                      <p class="mono break">{hook.url}</p>
                      <p class="muted">
                        {hook.description ? `${hook.description} · ` : ""}
                        {hook.events.join(", ")} · secret {hook.signing_secret_preview}
                        {hook.disabled_at
                          ? ` · disabled ${dateTime(hook.disabled_at)} (the endpoint answered 410)`
                          : ""}
                      </p>
                    </div>
                    {can(me, "admin") && (
                      <div class="row wrap">
                        <button
                          type="button"
                          class="secondary"
                          disabled={action.busy}
                          onClick={() =>
                            void action.run(async () => {
                              const rotated = await api.post<Webhook & { signing_secret: string }>(
                                `/v1/webhooks/${hook.id}/rotate-secret`
                              )
                              reveal({ url: rotated.url, secret: rotated.signing_secret })
                            })
                          }
                        >
                          Rotate secret
                        </button>
                        <button
                          type="button"
                          class="danger"
                          disabled={action.busy}
                          onClick={() =>
                            confirm(`Delete the webhook ${hook.url}?`) &&
                            void action.run(() => api.delete(`/v1/webhooks/${hook.id}`).then(list.reload))
                          }
                        >
                          Delete
                        </button>
                      </div>
                    )}
                  </li>
                ))}
              </ul>
            )}
          </Section>
          <Section title="Deliveries">
            <Deliveries webhooks={list.data.webhooks} />
          </Section>
        </>
      )}
    </>
  )
}
