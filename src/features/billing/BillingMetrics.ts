import { Metric } from "effect"

export const ledgerCredits = Metric.counter("rbs_ledger_credits_micro_usd_total", {
  description: "Micro-USD credited to balances, by kind (topup, grant, signup_credit)"
})

export const ledgerDebits = Metric.counter("rbs_ledger_debits_micro_usd_total", {
  description: "Micro-USD debited from balances, by kind (session_egress)"
})
