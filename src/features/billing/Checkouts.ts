import { Clock, Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { Audit } from "../audit/Audit.ts"
import { type Owner, systemOwner } from "../../kernel/Owner.ts"
import * as Crypto from "node:crypto"
import type { Checkout } from "../../kernel/Billing.ts"
import { CheckoutNotFound } from "../../kernel/Errors.ts"
import { Billing } from "./Billing.ts"
import { type CheckoutRow, BillingRepo } from "./BillingRepo.ts"
import { MICRO_USD_PER_USD, usdToMicro } from "./Money.ts"
import { type CompletedPayment, PaymentProvider, type PaymentProviderError } from "./PaymentProvider.ts"
import * as Sql from "../../platform/db/Sql.ts"

const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

/** A checkout as the account sees it. */
export interface CheckoutView {
  readonly row: CheckoutRow
  readonly checkout: Checkout
}

/**
 * Top-ups: a checkout is opened with the payment provider, and the payment it
 * reports (a local confirmation or a signed provider event) credits the
 * balance once per provider payment, however often it is reported.
 */
export class Checkouts extends Context.Service<
  Checkouts,
  {
    /** Opens a checkout for `owner`'s active account, audited as `billing.checkout_started`. */
    readonly start: (input: {
      readonly owner: Owner
      readonly userId: string
      readonly email: string | undefined
      readonly amountUsd: number
    }) => Effect.Effect<Checkout, PaymentProviderError>
    /** The account's checkout; another account's is not found. */
    readonly find: (accountId: string, id: string) => Effect.Effect<Checkout, CheckoutNotFound>
    /** The local provider's confirmation: pays the checkout and credits its amount. */
    readonly confirmLocal: (
      accountId: string,
      id: string
    ) => Effect.Effect<{ readonly credited: boolean; readonly balance: bigint }, CheckoutNotFound>
    /** A payment the provider reported: credits what was paid, once. */
    readonly recordPayment: (payment: CompletedPayment) => Effect.Effect<{ readonly credited: boolean }>
  }
>()("rbs/billing/Checkouts") {
  static readonly layer = Layer.effect(
    Checkouts,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* BillingRepo
      const billing = yield* Billing
      const provider = yield* PaymentProvider
      const audit = yield* Audit

      const toCheckout = (row: CheckoutRow, url: string): Checkout => ({
        id: row.id,
        object: "checkout",
        provider: row.provider,
        status: row.status,
        amount_usd: Number(row.amount_micro_usd / MICRO_USD_PER_USD),
        checkout_url: url,
        created_at: row.created_at,
        completed_at: row.completed_at
      })

      const start = Effect.fn("Checkouts.start")(function* (input: {
        readonly owner: Owner
        readonly userId: string
        readonly email: string | undefined
        readonly amountUsd: number
      }) {
        const accountId = input.owner.accountId
        const row = yield* repo.insertCheckout({
          id: Crypto.randomUUID(),
          accountId,
          userId: input.userId,
          provider: provider.name,
          amount: usdToMicro(input.amountUsd),
          at: yield* now
        })
        const opened = yield* provider.createCheckout({
          checkoutId: row.id,
          accountId,
          amountUsd: input.amountUsd,
          customerEmail: input.email
        })
        yield* sql
          .withTransaction(
            Effect.andThen(
              repo.setCheckoutRef(row.id, opened.providerRef, opened.url),
              audit.record(input.owner, {
                action: "billing.checkout_started",
                targetType: "checkout",
                targetId: row.id,
                details: { amount_usd: input.amountUsd, provider: provider.name }
              })
            )
          )
          .pipe(Sql.orDefect)
        yield* Effect.logInfo("billing.checkout_started", {
          checkoutId: row.id,
          accountId,
          provider: provider.name,
          amountUsd: input.amountUsd
        })
        return toCheckout(row, opened.url)
      })

      const owned = (accountId: string, id: string) =>
        (/^[0-9a-f-]{36}$/.test(id)
          ? repo.findCheckout(id)
          : Effect.succeed(Option.none<CheckoutRow>())
        ).pipe(
          Effect.flatMap((row) =>
            Option.isSome(row) && row.value.account_id === accountId
              ? Effect.succeed(row.value)
              : Effect.fail(new CheckoutNotFound())
          )
        )

      const find = (accountId: string, id: string) =>
        Effect.map(owned(accountId, id), (row) => toCheckout(row, row.url ?? ""))

      const complete = (row: CheckoutRow, paymentId: string, paid: bigint) =>
        sql
          .withTransaction(
            Effect.gen(function* () {
              const result = yield* billing.credit({
                accountId: row.account_id,
                amount: paid,
                kind: "topup",
                description: `Top-up of ${Number(paid) / 1_000_000} USD (${row.provider} checkout ${row.id})`,
                provider: row.provider,
                providerPaymentId: paymentId
              })
              yield* repo.completeCheckout(row.id, yield* now)
              if (result.credited) {
                // The payment provider is the actor here, not the request that reported it.
                yield* audit.record(systemOwner(row.account_id), {
                  action: "billing.topup_credited",
                  targetType: "checkout",
                  targetId: row.id,
                  details: { amount_micro_usd: String(paid), provider: row.provider }
                })
              }
              return result
            })
          )
          .pipe(Sql.orDefect)

      const confirmLocal = Effect.fn("Checkouts.confirmLocal")(function* (accountId: string, id: string) {
        const row = yield* owned(accountId, id)
        if (row.provider !== "local") return yield* new CheckoutNotFound()
        return yield* complete(row, row.id, row.amount_micro_usd)
      })

      const recordPayment = Effect.fn("Checkouts.recordPayment")(function* (payment: CompletedPayment) {
        const byRef = yield* repo.findCheckoutByRef(provider.name, payment.providerRef)
        // The provider's reference is recorded right after the provider opened the checkout; if
        // this process died in between, our id, which the provider carries back, still finds it.
        const row = Option.isSome(byRef)
          ? byRef
          : payment.checkoutId === undefined || !/^[0-9a-f-]{36}$/.test(payment.checkoutId)
            ? Option.none<CheckoutRow>()
            : Option.filter(
                yield* repo.findCheckout(payment.checkoutId),
                (found) => found.provider === provider.name && found.provider_ref === null
              )
        if (Option.isNone(row)) {
          // Another integration's checkout on the same provider account: not ours to credit.
          yield* Effect.logWarning("billing.payment_unknown", { providerRef: payment.providerRef })
          return { credited: false }
        }
        if (payment.paidMicroUsd !== row.value.amount_micro_usd) {
          yield* Effect.logWarning("billing.payment_amount_differs", {
            checkoutId: row.value.id,
            expected: String(row.value.amount_micro_usd),
            paid: String(payment.paidMicroUsd)
          })
        }
        const result = yield* complete(row.value, payment.providerRef, payment.paidMicroUsd)
        return { credited: result.credited }
      })

      return Checkouts.of({ start, find, confirmLocal, recordPayment })
    })
  )
}
