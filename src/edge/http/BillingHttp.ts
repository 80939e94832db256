import { Effect, Layer, Option } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { SqlClient } from "effect/sql"
import { Api } from "./Api.ts"
import { Accounts } from "../../features/identity/Accounts.ts"
import { Audit } from "../../features/audit/Audit.ts"
import { CurrentOwner, CurrentPrincipal } from "../../features/policy/AuthMiddleware.ts"
import { Users } from "../../features/identity/Users.ts"
import { CheckoutNotFound, Forbidden, ServiceUnavailable } from "../../kernel/Errors.ts"
import { permits, userIdOf } from "../../kernel/Owner.ts"
import { Billing } from "../../features/billing/Billing.ts"
import { checkoutPage, paidPage, pendingPage } from "../../features/billing/CheckoutPages.ts"
import { Checkouts } from "../../features/billing/Checkouts.ts"
import { formatUsd } from "../../features/billing/Money.ts"
import { PaymentProvider } from "../../features/billing/PaymentProvider.ts"

/** A top-up of the active account, started by a person. */
const startCheckout = (amountUsd: number) =>
  Effect.gen(function* () {
    const owner = yield* CurrentOwner
    const users = yield* Users
    const checkouts = yield* Checkouts
    const userId = userIdOf(owner)
    const user = userId === null ? Option.none() : yield* users.findById(userId)
    if (Option.isNone(user)) return yield* new Forbidden()
    const checkout = yield* checkouts
      .start({
        owner,
        userId: user.value.user.id,
        email: user.value.user.email,
        amountUsd
      })
      .pipe(
        Effect.catchTag("PaymentProviderError", (error) =>
          Effect.logError("billing.provider_failed", { error: error.message, cause: error.cause }).pipe(
            Effect.andThen(Effect.fail(new ServiceUnavailable()))
          )
        )
      )
    return checkout
  })

export const BillingHttp = HttpApiBuilder.group(
  Api,
  "billing",
  Effect.fn(function* (handlers) {
    const billing = yield* Billing
    const checkouts = yield* Checkouts
    const provider = yield* PaymentProvider
    const users = yield* Users
    const audit = yield* Audit
    const sql = yield* SqlClient.SqlClient
    const withDeps = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      effect.pipe(Effect.provideService(Checkouts, checkouts), Effect.provideService(Users, users))
    return handlers
      .handle("topup", ({ payload }) =>
        withDeps(
          Effect.map(startCheckout(payload.amount_usd), (checkout) => ({
            checkout_url: checkout.checkout_url
          }))
        )
      )
      .handle("checkout", ({ payload }) => withDeps(startCheckout(payload.amount_usd)))
      .handle("summary", () => Effect.flatMap(CurrentOwner, (owner) => billing.summary(owner.accountId)))
      .handle("account", ({ payload }) =>
        Effect.gen(function* () {
          const owner = yield* CurrentOwner
          const billing_contact = yield* sql
            .withTransaction(
              Effect.tap(billing.setContact(owner.accountId, payload), () =>
                audit.record(owner, {
                  action: "billing.contact_updated",
                  targetType: "account",
                  targetId: owner.accountId,
                  details: { fields: Object.keys(payload) }
                })
              )
            )
            .pipe(Effect.orDie)
          return { billing_contact }
        })
      )
      .handle("alerts", ({ payload }) =>
        Effect.gen(function* () {
          const owner = yield* CurrentOwner
          const micro = BigInt(Math.round(payload.low_balance_threshold_usd * 1_000_000))
          yield* sql
            .withTransaction(
              Effect.andThen(
                billing.setLowBalanceThreshold(owner.accountId, micro),
                audit.record(owner, {
                  action: "billing.alerts_updated",
                  targetType: "account",
                  targetId: owner.accountId,
                  details: { low_balance_threshold_micro_usd: String(micro) }
                })
              )
            )
            .pipe(Effect.orDie)
          return { low_balance_threshold_micro_usd: Number(micro) }
        })
      )
      .handle("stripeWebhook", ({ payload, headers }) =>
        Effect.gen(function* () {
          const payment = yield* provider.parseWebhook(payload, headers["stripe-signature"])
          if (payment._tag === "Some") yield* checkouts.recordPayment(payment.value)
          return { received: true }
        })
      )
  })
)

export const CheckoutPagesHttp = HttpApiBuilder.group(
  Api,
  "checkoutPages",
  Effect.fn(function* (handlers) {
    const billing = yield* Billing
    const checkouts = yield* Checkouts
    const accounts = yield* Accounts
    /** The paying account: one of the user's where they may top up (a browser sends no account header). */
    const accountOf = (id: string) =>
      Effect.gen(function* () {
        const principal = yield* CurrentPrincipal
        for (const account of yield* accounts.list(principal)) {
          if (!permits({ principal, role: account.role }, "billing.write")) continue
          const found = yield* Effect.option(checkouts.find(account.id, id))
          if (Option.isSome(found)) return account.id
        }
        return yield* new CheckoutNotFound()
      })
    return handlers
      .handle("show", ({ params }) =>
        Effect.gen(function* () {
          const checkout = yield* checkouts.find(yield* accountOf(params.id), params.id)
          return checkoutPage(checkout)
        })
      )
      .handle("pay", ({ params }) =>
        Effect.gen(function* () {
          const accountId = yield* accountOf(params.id)
          const paid = yield* checkouts.confirmLocal(accountId, params.id)
          return paidPage(yield* checkouts.find(accountId, params.id), formatUsd(paid.balance))
        })
      )
      .handle("done", ({ params }) =>
        Effect.gen(function* () {
          const accountId = yield* accountOf(params.id)
          const checkout = yield* checkouts.find(accountId, params.id)
          return checkout.status === "completed"
            ? paidPage(checkout, formatUsd(yield* billing.balance(accountId)))
            : pendingPage(checkout)
        })
      )
  })
)

export const layer = Layer.mergeAll(BillingHttp, CheckoutPagesHttp)
