import { Schema } from "effect"

export const MIN_TOPUP_USD = 10
export const MAX_TOPUP_USD = 100_000

export const LedgerKind = Schema.Literals(["topup", "grant", "signup_credit", "session_egress"])
export type LedgerKind = typeof LedgerKind.Type

/** One line of an account's ledger: a credit (positive) or a debit (negative), in micro-USD. */
export const LedgerEntry = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("ledger_entry"),
  kind: LedgerKind,
  amount_micro_usd: Schema.Number,
  balance_after_micro_usd: Schema.Number,
  description: Schema.String,
  session_id: Schema.NullOr(Schema.String),
  created_at: Schema.DateFromString
})
export type LedgerEntry = typeof LedgerEntry.Type

const Text = (max: number) => Schema.String.check(Schema.isMaxLength(max))

export const BillingAddress = Schema.Struct({
  line1: Schema.optionalKey(Schema.NullOr(Text(200))),
  line2: Schema.optionalKey(Schema.NullOr(Text(200))),
  city: Schema.optionalKey(Schema.NullOr(Text(100))),
  postal_code: Schema.optionalKey(Schema.NullOr(Text(20))),
  state: Schema.optionalKey(Schema.NullOr(Text(100))),
  /** ISO 3166-1 alpha-2, e.g. `DE`. */
  country: Schema.optionalKey(Schema.NullOr(Schema.String.check(Schema.isPattern(/^[A-Z]{2}$/))))
})
export type BillingAddress = typeof BillingAddress.Type

/** `POST /v1/billing/account`: the billing contact; omitted fields are left as they are, null clears. */
export const BillingContactRequest = Schema.Struct({
  name: Schema.optionalKey(Schema.NullOr(Text(200))),
  email: Schema.optionalKey(
    Schema.NullOr(
      Schema.String.check(Schema.isMaxLength(254), Schema.isPattern(/^[^\s@]+@[^\s@]+\.[^\s@]+$/))
    )
  ),
  address: Schema.optionalKey(Schema.NullOr(BillingAddress)),
  tax_id: Schema.optionalKey(Schema.NullOr(Text(64)))
})
export type BillingContactRequest = typeof BillingContactRequest.Type

export const BillingContact = Schema.Struct({
  name: Schema.NullOr(Schema.String),
  email: Schema.NullOr(Schema.String),
  address: Schema.NullOr(BillingAddress),
  tax_id: Schema.NullOr(Schema.String),
  updated_at: Schema.DateFromString
})
export type BillingContact = typeof BillingContact.Type

export const BillingSummary = Schema.Struct({
  object: Schema.Literal("billing_summary"),
  account_id: Schema.String,
  currency: Schema.Literal("usd"),
  balance_micro_usd: Schema.Number,
  /** The balance in dollars, exactly, as a decimal string (`"12.500000"`). */
  balance_usd: Schema.String,
  egress_price: Schema.Struct({
    usd_per_gb: Schema.Number,
    bytes_per_micro_usd: Schema.Number
  }),
  billing_contact: Schema.NullOr(BillingContact),
  /** Below this, a charge sends `balance.low` (webhooks). */
  low_balance_threshold_micro_usd: Schema.Number,
  recent_entries: Schema.Array(LedgerEntry)
})
export type BillingSummary = typeof BillingSummary.Type

/** `POST /v1/billing/alerts`: the balance below which a charge sends `balance.low`, in US dollars. */
export const BillingAlertsRequest = Schema.Struct({
  low_balance_threshold_usd: Schema.Number.check(Schema.isBetween({ minimum: 0, maximum: 1_000_000 }))
})
export const BillingAlerts = Schema.Struct({ low_balance_threshold_micro_usd: Schema.Number })

/** A top-up amount: whole US dollars, at least 10. */
export const TopupAmount = Schema.Int.check(
  Schema.isBetween({ minimum: MIN_TOPUP_USD, maximum: MAX_TOPUP_USD })
)

export const TopupRequest = Schema.Struct({ amount_usd: TopupAmount })
export type TopupRequest = typeof TopupRequest.Type

export const CheckoutStatus = Schema.Literals(["open", "completed"])

export const Checkout = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("checkout"),
  provider: Schema.String,
  status: CheckoutStatus,
  amount_usd: Schema.Number,
  checkout_url: Schema.String,
  created_at: Schema.DateFromString,
  completed_at: Schema.NullOr(Schema.DateFromString)
})
export type Checkout = typeof Checkout.Type
