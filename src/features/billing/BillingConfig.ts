import { Context, Layer, type Option } from "effect"
import { ServiceConfig, type StripeConfig } from "../../platform/config/Config.ts"

/** `SIGNUP_CREDIT_USD` (in micro-USD) and Stripe (`STRIPE_*`; `None`: the local checkout). */
export class BillingConfig extends Context.Service<
  BillingConfig,
  { readonly signupCreditMicroUsd: bigint; readonly stripe: Option.Option<StripeConfig> }
>()("rbs/billing/BillingConfig") {
  static readonly layer = Layer.effect(
    BillingConfig,
    ServiceConfig.useSync((config) => ({
      signupCreditMicroUsd: config.signupCreditMicroUsd,
      stripe: config.stripe
    }))
  )
}
