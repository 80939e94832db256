import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "./Api.ts"
import { ApiKeys } from "../../features/identity/ApiKeys.ts"
import { CurrentOwner, CurrentPrincipal } from "../../features/policy/AuthMiddleware.ts"
import { Accounts } from "../../features/identity/Accounts.ts"
import { ServiceAccounts } from "../../features/identity/ServiceAccounts.ts"

export const AccountsHttp = HttpApiBuilder.group(
  Api,
  "accounts",
  Effect.fn(function* (handlers) {
    const accounts = yield* Accounts
    const serviceAccounts = yield* ServiceAccounts
    const keys = yield* ApiKeys
    const withOwner = <A, E, R>(f: (owner: typeof CurrentOwner.Service) => Effect.Effect<A, E, R>) =>
      Effect.flatMap(CurrentOwner, f)
    return handlers
      .handle("list", () =>
        Effect.flatMap(CurrentPrincipal, (principal) =>
          Effect.map(accounts.list(principal), (list) => ({ accounts: list }))
        )
      )
      .handle("current", () =>
        withOwner((owner) => Effect.map(accounts.current(owner), (account) => ({ account })))
      )
      .handle("createOrganization", ({ payload }) =>
        withOwner((owner) =>
          Effect.map(accounts.createOrganization(owner, payload), (account) => ({ account }))
        )
      )
      .handle("listMembers", () =>
        withOwner((owner) => Effect.map(accounts.listMembers(owner), (members) => ({ members })))
      )
      .handle("addMember", ({ payload }) => withOwner((owner) => accounts.addMember(owner, payload)))
      .handle("updateMember", ({ params, payload }) =>
        withOwner((owner) =>
          Effect.map(accounts.updateMember(owner, params.uid, payload), (member) => ({ member }))
        )
      )
      .handle("removeMember", ({ params }) => withOwner((owner) => accounts.removeMember(owner, params.uid)))
      .handle("listServiceAccounts", () =>
        withOwner((owner) =>
          Effect.map(serviceAccounts.list(owner), (service_accounts) => ({ service_accounts }))
        )
      )
      .handle("createServiceAccount", ({ payload }) =>
        withOwner((owner) =>
          Effect.map(serviceAccounts.create(owner, payload), (service_account) => ({
            service_account
          }))
        )
      )
      .handle("deleteServiceAccount", ({ params }) =>
        withOwner((owner) => serviceAccounts.remove(owner, params.said))
      )
      .handle("listServiceAccountKeys", ({ params }) =>
        withOwner((owner) =>
          Effect.gen(function* () {
            const found = yield* serviceAccounts.find(owner, params.said)
            return { keys: yield* keys.list(owner, found.id) }
          })
        )
      )
      .handle("createServiceAccountKey", ({ params, payload }) =>
        withOwner((owner) =>
          Effect.flatMap(serviceAccounts.find(owner, params.said), (found) =>
            keys.create(owner, payload, found.id)
          )
        )
      )
      .handle("revokeServiceAccountKey", ({ params }) =>
        withOwner((owner) =>
          Effect.flatMap(serviceAccounts.find(owner, params.said), (found) =>
            keys.revoke(owner, params.kid, found.id)
          )
        )
      )
  })
)
