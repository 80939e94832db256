import { Effect, Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { CurrentAccount, CurrentUser } from "../auth/AuthMiddleware.ts"
import { Identity } from "../auth/Identity.ts"
import { ServiceUnavailable } from "../domain/Errors.ts"
import { Billing } from "./Billing.ts"
import { checkoutPage, paidPage, pendingPage } from "./CheckoutPages.ts"
import { Checkouts } from "./Checkouts.ts"
import { formatUsd } from "./Money.ts"
import { PaymentProvider } from "./PaymentProvider.ts"

/** The checkout of the cookie user's personal account. */
const startCheckout = (amountUsd: number) =>
  Effect.gen(function* () {
    const user = yield* CurrentUser
    const identity = yield* Identity
    const checkouts = yield* Checkouts
    const accountId = yield* identity.personalAccountId(user)
    return yield* checkouts
      .start({ accountId, userId: user.id, email: user.email, amountUsd })
      .pipe(
        Effect.catchTag("PaymentProviderError", (error) =>
          Effect.logError("billing.provider_failed", { error: error.message, cause: error.cause }).pipe(
            Effect.andThen(Effect.fail(new ServiceUnavailable()))
          )
        )
      )
  })

export const BillingHttp = HttpApiBuilder.group(
  Api,
  "billing",
  Effect.fn(function* (handlers) {
    const billing = yield* Billing
    const checkouts = yield* Checkouts
    const provider = yield* PaymentProvider
    const identity = yield* Identity
    const withDeps = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      effect.pipe(Effect.provideService(Checkouts, checkouts), Effect.provideService(Identity, identity))
    return handlers
      .handle("topup", ({ payload }) =>
        withDeps(
          Effect.map(startCheckout(payload.amount_usd), (checkout) => ({
            checkout_url: checkout.checkout_url
          }))
        )
      )
      .handle("checkout", ({ payload }) => withDeps(startCheckout(payload.amount_usd)))
      .handle("summary", () =>
        Effect.flatMap(CurrentAccount, (account) => billing.summary(account.accountId))
      )
      .handle("account", ({ payload }) =>
        Effect.flatMap(CurrentAccount, (account) =>
          Effect.map(billing.setContact(account.accountId, payload), (billing_contact) => ({
            billing_contact
          }))
        )
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
    const identity = yield* Identity
    const accountOfUser = Effect.flatMap(CurrentUser, identity.personalAccountId)
    return handlers
      .handle("show", ({ params }) =>
        Effect.gen(function* () {
          const checkout = yield* checkouts.find(yield* accountOfUser, params.id)
          return checkoutPage(checkout)
        })
      )
      .handle("pay", ({ params }) =>
        Effect.gen(function* () {
          const accountId = yield* accountOfUser
          const paid = yield* checkouts.confirmLocal(accountId, params.id)
          return paidPage(yield* checkouts.find(accountId, params.id), formatUsd(paid.balance))
        })
      )
      .handle("done", ({ params }) =>
        Effect.gen(function* () {
          const accountId = yield* accountOfUser
          const checkout = yield* checkouts.find(accountId, params.id)
          return checkout.status === "completed"
            ? paidPage(checkout, formatUsd(yield* billing.balance(accountId)))
            : pendingPage(checkout)
        })
      )
  })
)

export const layer = Layer.mergeAll(BillingHttp, CheckoutPagesHttp)
