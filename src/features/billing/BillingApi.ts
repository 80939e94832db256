import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { audits, requires } from "../policy/Access.ts"
import { Authenticate, Authorize } from "../policy/AuthMiddleware.ts"
import {
  BillingContact,
  BillingAlerts,
  BillingAlertsRequest,
  BillingContactRequest,
  BillingSummary,
  Checkout,
  MAX_TOPUP_USD,
  MIN_TOPUP_USD,
  TopupRequest
} from "../../kernel/Billing.ts"
import {
  CheckoutNotFound,
  Forbidden,
  ServiceUnavailable,
  WebhookSignatureInvalid
} from "../../kernel/Errors.ts"

const Html = Schema.String.pipe(HttpApiSchema.asText({ contentType: "text/html; charset=utf-8" }))

const amountRule = `\`amount_usd\`: whole US dollars, ${MIN_TOPUP_USD} to ${MAX_TOPUP_USD}.`

export class BillingApi extends HttpApiGroup.make("billing")
  .add(
    HttpApiEndpoint.post("topup", "/v1/billing/topup", {
      payload: TopupRequest,
      success: Schema.Struct({ checkout_url: Schema.String }),
      error: [ServiceUnavailable.Wire, Forbidden.Wire]
    })
      .middleware(Authorize)
      .middleware(Authenticate)
      .annotateMerge(requires("billing.write", "cookie", audits("billing.checkout_started", "checkout")))
      .annotate(
        OpenApi.Description,
        `Starts a top-up of the caller's balance and answers the URL to pay at. ${amountRule} The dashboard cookie only (an API key or an access token is 403 \`forbidden\`), with \`billing.write\` (admins and owners); tops up the active account. With \`STRIPE_SECRET_KEY\` set the URL is a Stripe Checkout page and the signed \`checkout.session.completed\` event credits the balance; otherwise it is this service's own checkout page, whose one button credits it.`
      ),
    HttpApiEndpoint.post("checkout", "/v1/billing/checkout", {
      payload: TopupRequest,
      success: Checkout.pipe(HttpApiSchema.status(201)),
      error: [ServiceUnavailable.Wire, Forbidden.Wire]
    })
      .middleware(Authorize)
      .middleware(Authenticate)
      .annotateMerge(requires("billing.write", "cookie", audits("billing.checkout_started", "checkout")))
      .annotate(
        OpenApi.Description,
        `The same flow as \`/v1/billing/topup\`, answering the whole checkout (id, provider, status, amount, URL). ${amountRule} The dashboard cookie only, like top-up.`
      ),
    HttpApiEndpoint.get("summary", "/v1/billing/summary", {
      success: BillingSummary
    })
      .middleware(Authorize)
      .middleware(Authenticate)
      .annotateMerge(requires("billing.read"))
      .annotate(
        OpenApi.Description,
        "The account's prepaid balance (integer micro-USD and an exact decimal string), the egress price, the billing contact and the 20 most recent ledger entries (credits positive, debits negative). Of the active account."
      ),
    HttpApiEndpoint.post("account", "/v1/billing/account", {
      payload: BillingContactRequest,
      success: Schema.Struct({ billing_contact: BillingContact })
    })
      .middleware(Authorize)
      .middleware(Authenticate)
      .annotateMerge(requires("billing.write", "any", audits("billing.contact_updated", "account")))
      .annotate(
        OpenApi.Description,
        "Sets the billing contact shown on invoices: `name`, `email`, `address` (`line1`, `line2`, `city`, `postal_code`, `state`, `country` as ISO 3166-1 alpha-2) and `tax_id`. Fields left out keep their value; `null` clears one."
      ),
    HttpApiEndpoint.post("alerts", "/v1/billing/alerts", {
      payload: BillingAlertsRequest,
      success: BillingAlerts
    })
      .middleware(Authorize)
      .middleware(Authenticate)
      .annotateMerge(requires("billing.write", "any", audits("billing.alerts_updated", "account")))
      .annotate(
        OpenApi.Description,
        "An extension: `low_balance_threshold_usd` (0 to 1,000,000; default 1) is the balance below which a session's charge sends the `balance.low` webhook event. 0 turns it off; `balance.depleted` is sent whatever it is."
      ),
    HttpApiEndpoint.post("stripeWebhook", "/v1/billing/stripe/webhook", {
      payload: Schema.String.pipe(HttpApiSchema.asText({ contentType: "application/json" })),
      headers: { "stripe-signature": Schema.String },
      success: Schema.Struct({ received: Schema.Boolean }),
      error: WebhookSignatureInvalid.Wire
    }).annotate(
      OpenApi.Description,
      "Stripe's webhook endpoint (configure it in Stripe with `STRIPE_WEBHOOK_SECRET`). The `Stripe-Signature` header is verified with the official SDK; `checkout.session.completed` (and `checkout.session.async_payment_succeeded`) of a paid session credits the balance once per Stripe checkout session, however often it is delivered. Other events are acknowledged and ignored."
    )
  )
  .annotate(OpenApi.Title, "Billing") {}

/** The local payment provider's pages: what `checkout_url` points at when Stripe is not configured. */
export class CheckoutPagesApi extends HttpApiGroup.make("checkoutPages")
  .add(
    HttpApiEndpoint.get("show", "/billing/checkout/:id", {
      params: { id: Schema.String },
      success: Html,
      error: CheckoutNotFound.Wire
    })
      .annotateMerge(requires(null, "cookie"))
      .annotate(
        OpenApi.Description,
        "The local checkout page (HTML): the amount and one button that pays it. Dashboard cookie of an admin or owner of the paying account."
      ),
    HttpApiEndpoint.post("pay", "/billing/checkout/:id", {
      params: { id: Schema.String },
      success: Html,
      error: CheckoutNotFound.Wire
    })
      .annotateMerge(requires(null, "cookie", audits("billing.topup_credited", "checkout", "id")))
      .annotate(
        OpenApi.Description,
        "The local checkout page's button: credits the balance (once, however often it is submitted) and shows a confirmation."
      ),
    HttpApiEndpoint.get("done", "/billing/checkout/:id/done", {
      params: { id: Schema.String },
      success: Html,
      error: CheckoutNotFound.Wire
    })
      .annotateMerge(requires(null, "cookie"))
      .annotate(OpenApi.Description, "Where a payment provider sends the payer back: the checkout's status.")
  )
  .middleware(Authorize)
  .middleware(Authenticate)
  .annotate(OpenApi.Title, "Checkout pages") {}
