import { useState } from "preact/hooks"
import { api, setActiveAccount } from "../api.ts"
import { Empty, ErrorText, Loading, PageTitle, SecretOnce, Section, TableWrap } from "../components.tsx"
import { dateTime } from "../format.ts"
import { useAction, useLoad } from "../hooks.ts"
import { can, useMe } from "../me.ts"
import type { Account, ApiKey, CreatedKey, Member, Role, ServiceAccount } from "../types.ts"

const ROLES: ReadonlyArray<Role> = ["owner", "admin", "member", "viewer"]

const CreateOrganization = () => {
  const [name, setName] = useState("")
  const request = useAction()
  return (
    <form
      class="row wrap end"
      onSubmit={(e) => {
        e.preventDefault()
        void request.run(async () => {
          const { account } = await api.post<{ account: Account }>("/v1/accounts/organizations", { name })
          // Acting on the new organization: the page reloads with it among the accounts.
          setActiveAccount(account.id)
          location.reload()
        })
      }}
    >
      <div class="stack">
        <label for="org-name">Organization name</label>
        <input
          id="org-name"
          required
          maxLength={100}
          value={name}
          onInput={(e) => setName(e.currentTarget.value)}
        />
      </div>
      <button type="submit" disabled={request.busy}>
        Create organization
      </button>
      <ErrorText message={request.error} />
    </form>
  )
}

const Members = () => {
  const me = useMe()
  const members = useLoad(
    () => api.get<{ members: ReadonlyArray<Member> }>("/v1/accounts/current/members"),
    []
  )
  const [email, setEmail] = useState("")
  const [role, setRole] = useState<Role>("member")
  const action = useAction()
  const admin = can(me, "admin")
  return (
    <>
      {admin && (
        <form
          class="row wrap end"
          onSubmit={(e) => {
            e.preventDefault()
            void action.run(async () => {
              await api.post("/v1/accounts/current/members", { email, role })
              setEmail("")
              members.reload()
            })
          }}
        >
          <div class="stack">
            <label for="member-email">Member email</label>
            <input
              id="member-email"
              type="email"
              required
              value={email}
              onInput={(e) => setEmail(e.currentTarget.value)}
            />
          </div>
          <div class="stack">
            <label for="member-role">Role</label>
            <select id="member-role" value={role} onChange={(e) => setRole(e.currentTarget.value as Role)}>
              {ROLES.map((r) => (
                <option key={r} value={r}>
                  {r}
                </option>
              ))}
            </select>
          </div>
          <button type="submit" disabled={action.busy}>
            Add member
          </button>
        </form>
      )}
      <ErrorText message={action.error} />
      {members.data === undefined ? (
        members.error !== undefined ? (
          <ErrorText message={members.error} />
        ) : (
          <Loading what="members" />
        )
      ) : (
        <TableWrap label="Members">
          <table>
            <thead>
              <tr>
                <th scope="col">Email</th>
                <th scope="col">Role</th>
                <th scope="col">Joined</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {members.data.members.map((member) => (
                <tr key={member.user_id}>
                  <td>{member.email}</td>
                  <td>
                    {admin ? (
                      <label>
                        <span class="visually-hidden">Role of {member.email}</span>
                        <select
                          value={member.role}
                          disabled={action.busy}
                          onChange={(e) =>
                            void action.run(() =>
                              api
                                .patch(`/v1/accounts/current/members/${member.user_id}`, {
                                  role: e.currentTarget.value
                                })
                                .then(members.reload)
                            )
                          }
                        >
                          {ROLES.map((r) => (
                            <option key={r} value={r}>
                              {r}
                            </option>
                          ))}
                        </select>
                      </label>
                    ) : (
                      member.role
                    )}
                  </td>
                  <td>{dateTime(member.joined_at)}</td>
                  <td>
                    {(admin || member.user_id === me.user.id) && (
                      <button
                        type="button"
                        class="danger"
                        disabled={action.busy}
                        onClick={() =>
                          confirm(
                            member.user_id === me.user.id
                              ? "Leave this organization?"
                              : `Remove ${member.email}?`
                          ) &&
                          void action.run(() =>
                            api.delete(`/v1/accounts/current/members/${member.user_id}`).then(members.reload)
                          )
                        }
                      >
                        {member.user_id === me.user.id ? "Leave" : "Remove"}
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      )}
    </>
  )
}

const ServiceAccountKeys = ({ account }: { readonly account: ServiceAccount }) => {
  const base = `/v1/accounts/current/service-accounts/${account.id}/keys`
  const keys = useLoad(() => api.get<{ keys: ReadonlyArray<ApiKey> }>(base), [account.id])
  const [shown, setShown] = useState<CreatedKey>()
  const action = useAction()
  return (
    <div class="stack">
      {shown !== undefined && (
        <SecretOnce
          title={`New key for ${account.name}`}
          secret={shown.secret}
          onDone={() => setShown(undefined)}
        />
      )}
      <div>
        <button
          type="button"
          class="secondary"
          disabled={action.busy}
          onClick={() =>
            void action.run(async () => {
              setShown(await api.post<CreatedKey>(base, { name: `${account.name} key` }))
              keys.reload()
            })
          }
        >
          New key for {account.name}
        </button>
      </div>
      <ErrorText message={action.error ?? keys.error} />
      <ul class="plain">
        {(keys.data?.keys ?? []).map((key) => (
          <li key={key.id} class="item">
            <span class="mono grow">{key.prefix}…</span>
            <span>{key.revoked_at === null ? "active" : `revoked ${dateTime(key.revoked_at)}`}</span>
            {key.revoked_at === null && (
              <button
                type="button"
                class="danger"
                aria-label={`Revoke ${key.prefix}`}
                onClick={() => void action.run(() => api.delete(`${base}/${key.id}`).then(keys.reload))}
              >
                Revoke
              </button>
            )}
          </li>
        ))}
      </ul>
    </div>
  )
}

const ServiceAccounts = () => {
  const list = useLoad(
    () =>
      api.get<{ service_accounts: ReadonlyArray<ServiceAccount> }>("/v1/accounts/current/service-accounts"),
    []
  )
  const [name, setName] = useState("")
  const [role, setRole] = useState<Role>("member")
  const action = useAction()
  return (
    <>
      <form
        class="row wrap end"
        onSubmit={(e) => {
          e.preventDefault()
          void action.run(async () => {
            await api.post("/v1/accounts/current/service-accounts", { name, role })
            setName("")
            list.reload()
          })
        }}
      >
        <div class="stack">
          <label for="sa-name">Service account name</label>
          <input
            id="sa-name"
            required
            maxLength={100}
            value={name}
            onInput={(e) => setName(e.currentTarget.value)}
          />
        </div>
        <div class="stack">
          <label for="sa-role">Service account role</label>
          <select id="sa-role" value={role} onChange={(e) => setRole(e.currentTarget.value as Role)}>
            {ROLES.filter((r) => r !== "owner").map((r) => (
              <option key={r} value={r}>
                {r}
              </option>
            ))}
          </select>
        </div>
        <button type="submit" disabled={action.busy}>
          Create service account
        </button>
      </form>
      <ErrorText message={action.error} />
      {list.data === undefined ? (
        list.error !== undefined ? (
          <ErrorText message={list.error} />
        ) : (
          <Loading what="service accounts" />
        )
      ) : list.data.service_accounts.length === 0 ? (
        <Empty>No service accounts: they hold keys for automation that outlive any one person.</Empty>
      ) : (
        <ul class="plain">
          {list.data.service_accounts.map((account) => (
            <li key={account.id} class="card inner">
              <div class="row wrap between">
                <h3>
                  {account.name} <span class="muted">({account.role})</span>
                </h3>
                <button
                  type="button"
                  class="danger"
                  onClick={() =>
                    confirm(`Delete ${account.name}? Its keys stop working.`) &&
                    void action.run(() =>
                      api.delete(`/v1/accounts/current/service-accounts/${account.id}`).then(list.reload)
                    )
                  }
                >
                  Delete {account.name}
                </button>
              </div>
              <ServiceAccountKeys account={account} />
            </li>
          ))}
        </ul>
      )}
    </>
  )
}

export const Organization = () => {
  const me = useMe()
  return (
    <>
      <PageTitle>Organization</PageTitle>
      <p>
        Acting on <strong>{me.account.personal ? "your personal account" : me.account.name}</strong> as{" "}
        <strong>{me.account.role}</strong>. Switch accounts in the header.
      </p>
      <Section title="New organization">
        <CreateOrganization />
      </Section>
      {me.account.personal ? (
        <Section title="Members">
          <Empty>A personal account has no other members: create an organization to work with others.</Empty>
        </Section>
      ) : (
        <>
          <Section title="Members">
            <Members />
          </Section>
          {can(me, "admin") && (
            <Section title="Service accounts">
              <ServiceAccounts />
            </Section>
          )}
        </>
      )}
    </>
  )
}
