import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import { PublicUrls, type StripeConfig } from "../../platform/config/Config.ts"
import { BillingConfig } from "./BillingConfig.ts"
import { WebhookSignatureInvalid } from "../../kernel/Errors.ts"

export class PaymentProviderError extends Schema.TaggedError<PaymentProviderError>()("PaymentProviderError", {
  message: Schema.String,
  cause: Schema.optional(Schema.Defect())
}) {}

export interface CheckoutRequest {
  /** Our checkout's id: the provider carries it back with the payment. */
  readonly checkoutId: string
  readonly accountId: string
  readonly amountUsd: number
  readonly customerEmail: string | undefined
}

/** A payment the provider reports as made. */
export interface CompletedPayment {
  /** The provider's reference of the checkout (our `provider_ref`): also its payment id in the ledger. */
  readonly providerRef: string
  readonly checkoutId: string | undefined
  /** What was actually paid, in micro-USD. */
  readonly paidMicroUsd: bigint
}

/**
 * Where top-ups are paid: the local provider (a page of this service, for
 * self-hosters without a payment processor) or Stripe Checkout.
 */
export class PaymentProvider extends Context.Service<
  PaymentProvider,
  {
    readonly name: "local" | "stripe"
    /** Opens a checkout; the URL is where the payer goes. */
    readonly createCheckout: (
      request: CheckoutRequest
    ) => Effect.Effect<{ readonly url: string; readonly providerRef: string }, PaymentProviderError>
    /**
     * Verifies a provider's webhook delivery and reads the payment it reports,
     * if any (other events are `None`).
     */
    readonly parseWebhook: (
      payload: string,
      signature: string
    ) => Effect.Effect<Option.Option<CompletedPayment>, WebhookSignatureInvalid>
  }
>()("rbs/billing/PaymentProvider") {
  /** Checkout pages served by this service: one button credits the balance. */
  static readonly layerLocal = Layer.effect(
    PaymentProvider,
    Effect.gen(function* () {
      const config = yield* PublicUrls
      return PaymentProvider.of({
        name: "local",
        createCheckout: (request) =>
          Effect.succeed({
            url: `${config.publicUrl}/billing/checkout/${request.checkoutId}`,
            providerRef: request.checkoutId
          }),
        parseWebhook: () => Effect.fail(new WebhookSignatureInvalid())
      })
    })
  )

  /**
   * Stripe Checkout with the official SDK (loaded only here: a service without Stripe starts
   * without it); the signed `checkout.session.completed` event credits.
   */
  static readonly layerStripe = (stripeConfig: StripeConfig) =>
    Layer.effect(
      PaymentProvider,
      Effect.gen(function* () {
        const Stripe = (yield* Effect.promise(() => import("stripe"))).default
        const config = yield* PublicUrls
        const api = stripeConfig.apiUrl === undefined ? undefined : new URL(stripeConfig.apiUrl)
        const stripe = new Stripe(Redacted.value(stripeConfig.secretKey), {
          maxNetworkRetries: 2,
          timeout: 20_000,
          ...(api === undefined
            ? {}
            : {
                host: api.hostname,
                port: api.port === "" ? (api.protocol === "https:" ? 443 : 80) : Number(api.port),
                protocol: api.protocol === "http:" ? "http" : "https"
              })
        })

        const createCheckout = (request: CheckoutRequest) =>
          Effect.tryPromise({
            try: () =>
              stripe.checkout.sessions.create({
                mode: "payment",
                client_reference_id: request.checkoutId,
                ...(request.customerEmail === undefined ? {} : { customer_email: request.customerEmail }),
                line_items: [
                  {
                    quantity: 1,
                    price_data: {
                      currency: "usd",
                      unit_amount: request.amountUsd * 100,
                      product_data: { name: `Remote browser balance top-up (${request.amountUsd} USD)` }
                    }
                  }
                ],
                metadata: { checkout_id: request.checkoutId, account_id: request.accountId },
                success_url: `${config.publicUrl}/billing/checkout/${request.checkoutId}/done`,
                cancel_url: `${config.publicUrl}/billing/checkout/${request.checkoutId}/done`
              }),
            catch: (cause) => new PaymentProviderError({ message: "Stripe refused the checkout", cause })
          }).pipe(
            Effect.flatMap((session) =>
              session.url === null
                ? Effect.fail(new PaymentProviderError({ message: "Stripe returned no checkout URL" }))
                : Effect.succeed({ url: session.url, providerRef: session.id })
            )
          )

        const parseWebhook = (payload: string, signature: string) =>
          Effect.gen(function* () {
            if (stripeConfig.webhookSecret === undefined) return yield* new WebhookSignatureInvalid()
            const event = yield* Effect.try({
              try: () =>
                stripe.webhooks.constructEvent(
                  payload,
                  signature,
                  Redacted.value(stripeConfig.webhookSecret!)
                ),
              catch: () => new WebhookSignatureInvalid()
            })
            if (
              event.type !== "checkout.session.completed" &&
              event.type !== "checkout.session.async_payment_succeeded"
            ) {
              return Option.none<CompletedPayment>()
            }
            const session = event.data.object
            if (
              session.payment_status !== "paid" ||
              session.currency !== "usd" ||
              session.amount_total === null
            ) {
              return Option.none<CompletedPayment>()
            }
            return Option.some<CompletedPayment>({
              providerRef: session.id,
              checkoutId: session.metadata?.checkout_id ?? session.client_reference_id ?? undefined,
              // Stripe amounts are cents: 1 cent = 10,000 micro-USD.
              paidMicroUsd: BigInt(session.amount_total) * 10_000n
            })
          })

        return PaymentProvider.of({ name: "stripe", createCheckout, parseWebhook })
      })
    )

  /** Stripe when `STRIPE_SECRET_KEY` is set, the local provider otherwise. */
  static readonly layer = Layer.unwrap(
    BillingConfig.useSync((config) =>
      Option.match(config.stripe, {
        onNone: () => PaymentProvider.layerLocal,
        onSome: PaymentProvider.layerStripe
      })
    )
  )
}
