import { useState } from "preact/hooks"
import { api } from "../api.ts"
import {
  Badge,
  Empty,
  ErrorText,
  Loading,
  PageTitle,
  SecretOnce,
  Section,
  TableWrap
} from "../components.tsx"
import { dateTime } from "../format.ts"
import { useAction, useLoad } from "../hooks.ts"
import { SCOPES } from "../../../src/kernel/Scopes.ts"
import type { ApiKey, CreatedKey } from "../types.ts"

const CreateKey = ({ onCreated }: { readonly onCreated: (key: CreatedKey) => void }) => {
  const [name, setName] = useState("")
  const [mode, setMode] = useState<"live" | "test">("live")
  const [scopes, setScopes] = useState<ReadonlyArray<string>>([])
  const request = useAction()
  const toggle = (scope: string) =>
    setScopes(scopes.includes(scope) ? scopes.filter((s) => s !== scope) : [...scopes, scope])
  return (
    <form
      class="stack"
      onSubmit={(e) => {
        e.preventDefault()
        void request.run(async () => {
          const key = await api.post<CreatedKey>("/v1/keys", {
            name,
            mode,
            ...(scopes.length === 0 ? {} : { scopes })
          })
          setName("")
          setScopes([])
          onCreated(key)
        })
      }}
    >
      <label for="key-name">Key name</label>
      <input
        id="key-name"
        required
        maxLength={100}
        value={name}
        onInput={(e) => setName(e.currentTarget.value)}
      />
      <fieldset>
        <legend>Mode</legend>
        <label class="inline">
          <input type="radio" name="mode" checked={mode === "live"} onChange={() => setMode("live")} /> Live
          (sessions are charged)
        </label>
        <label class="inline">
          <input type="radio" name="mode" checked={mode === "test"} onChange={() => setMode("test")} /> Test
          (metered, never charged)
        </label>
      </fieldset>
      <fieldset>
        <legend>Scopes (none chosen: full access)</legend>
        <div class="checks">
          {SCOPES.map((scope) => (
            <label class="inline" key={scope}>
              <input type="checkbox" checked={scopes.includes(scope)} onChange={() => toggle(scope)} />{" "}
              <span class="mono">{scope}</span>
            </label>
          ))}
        </div>
      </fieldset>
      <ErrorText message={request.error} />
      <div>
        <button type="submit" disabled={request.busy}>
          {request.busy ? "Creating…" : "Create key"}
        </button>
      </div>
    </form>
  )
}

const KeyRow = ({
  apiKey,
  onChanged,
  onRotated
}: {
  readonly apiKey: ApiKey
  readonly onChanged: () => void
  readonly onRotated: (key: CreatedKey) => void
}) => {
  const action = useAction()
  const [grace, setGrace] = useState("7")
  const revoked = apiKey.revoked_at !== null && Date.parse(apiKey.revoked_at) <= Date.now()
  return (
    <tr>
      <td>{apiKey.name}</td>
      <td class="mono">{apiKey.prefix}…</td>
      <td>
        <Badge tone={apiKey.mode === "live" ? "info" : "neutral"}>{apiKey.mode}</Badge>
      </td>
      <td>{apiKey.scopes === null ? "full access" : apiKey.scopes.join(", ")}</td>
      <td>{apiKey.last_used_at === null ? "never" : dateTime(apiKey.last_used_at)}</td>
      <td>
        {apiKey.revoked_at === null
          ? "active"
          : revoked
            ? `revoked ${dateTime(apiKey.revoked_at)}`
            : `until ${dateTime(apiKey.revoked_at)}`}
      </td>
      <td>
        {apiKey.revoked_at === null && (
          <div class="row wrap">
            <button
              type="button"
              class="danger"
              disabled={action.busy}
              aria-label={`Revoke ${apiKey.name}`}
              onClick={() =>
                confirm(`Revoke the key "${apiKey.name}"? Requests with it fail at once.`) &&
                void action.run(() => api.delete(`/v1/keys/${apiKey.id}`).then(onChanged))
              }
            >
              Revoke
            </button>
            <label class="inline">
              <span class="visually-hidden">Grace days for {apiKey.name}</span>
              <select value={grace} onChange={(e) => setGrace(e.currentTarget.value)}>
                {[0, 1, 7, 30].map((days) => (
                  <option value={days} key={days}>
                    {days === 0 ? "no grace" : `${days} d grace`}
                  </option>
                ))}
              </select>
            </label>
            <button
              type="button"
              disabled={action.busy}
              aria-label={`Rotate ${apiKey.name}`}
              onClick={() =>
                void action.run(() =>
                  api
                    .post<CreatedKey>(`/v1/keys/${apiKey.id}/rotate`, { grace_days: Number(grace) })
                    .then(onRotated)
                )
              }
            >
              Rotate
            </button>
          </div>
        )}
        <ErrorText message={action.error} />
      </td>
    </tr>
  )
}

export const Keys = () => {
  const keys = useLoad(() => api.get<{ keys: ReadonlyArray<ApiKey> }>("/v1/keys"), [])
  // The one moment a secret exists in the page; dismissing it (or leaving) drops it.
  const [shown, setShown] = useState<CreatedKey>()
  const created = (key: CreatedKey) => {
    setShown(key)
    keys.reload()
  }
  return (
    <>
      <PageTitle>API keys</PageTitle>
      <p class="muted">
        Keys authenticate <code>/v1/*</code> and CDP connections as{" "}
        <code>Authorization: Bearer &lt;key&gt;</code>.
      </p>
      {shown !== undefined && (
        <SecretOnce
          title={`New key “${shown.name}”`}
          secret={shown.secret}
          onDone={() => setShown(undefined)}
        />
      )}
      <Section title="Create a key">
        <CreateKey onCreated={created} />
      </Section>
      <Section title="Your keys">
        {keys.loading && keys.data === undefined ? (
          <Loading what="keys" />
        ) : keys.error !== undefined ? (
          <ErrorText message={keys.error} />
        ) : keys.data!.keys.length === 0 ? (
          <Empty>No keys yet: create one above.</Empty>
        ) : (
          <TableWrap label="API keys">
            <table>
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Prefix</th>
                  <th scope="col">Mode</th>
                  <th scope="col">Scopes</th>
                  <th scope="col">Last used</th>
                  <th scope="col">State</th>
                  <th scope="col">Actions</th>
                </tr>
              </thead>
              <tbody>
                {keys.data!.keys.map((key) => (
                  <KeyRow key={key.id} apiKey={key} onChanged={keys.reload} onRotated={created} />
                ))}
              </tbody>
            </table>
          </TableWrap>
        )}
      </Section>
    </>
  )
}
