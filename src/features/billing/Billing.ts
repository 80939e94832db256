import { BillingConfig } from "./BillingConfig.ts"
import { Clock, Context, Effect, Layer, Metric, Option } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import type {
  BillingAddress,
  BillingContact,
  BillingContactRequest,
  BillingSummary,
  LedgerEntry
} from "../../kernel/Billing.ts"
import { AccountHooks } from "../identity/AccountHooks.ts"
import { AccountsRepo } from "../identity/AccountsRepo.ts"
import { PaymentRequired } from "../../kernel/Errors.ts"
import { countRejection } from "../limits/LimitMetrics.ts"
import { BalanceGate } from "../sessions/SessionAdmission.ts"
import { SessionsRepo } from "../sessions/SessionsRepo.ts"
import { type EndedFacts, SessionHooks, type SessionPart } from "../sessions/SessionLifecycle.ts"
import { ledgerCredits, ledgerDebits } from "./BillingMetrics.ts"
import { BillingRepo, type ContactRow, type LedgerRow } from "./BillingRepo.ts"
import { BYTES_PER_MICRO_USD, formatUsd } from "./Money.ts"
import { WebhookOutbox } from "../webhooks/Outbox.ts"
import * as Sql from "../../platform/db/Sql.ts"

const RECENT_ENTRIES = 20

const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

export interface Credit {
  readonly accountId: string
  /** Positive micro-USD. */
  readonly amount: bigint
  readonly kind: "topup" | "grant" | "signup_credit"
  readonly description: string
  /** With a provider payment id, the credit is applied at most once per payment. */
  readonly provider?: string | undefined
  readonly providerPaymentId?: string | undefined
}

const toEntry = (row: LedgerRow): LedgerEntry => ({
  id: row.id,
  object: "ledger_entry",
  kind: row.kind,
  amount_micro_usd: Number(row.amount_micro_usd),
  balance_after_micro_usd: Number(row.balance_after_micro_usd),
  description: row.description,
  session_id: row.session_id,
  created_at: row.created_at
})

const toContact = (row: ContactRow): BillingContact => ({
  name: row.name,
  email: row.email,
  address: (row.address ?? null) as BillingAddress | null,
  tax_id: row.tax_id,
  updated_at: row.updated_at
})

/**
 * Locks an account's money until the transaction ends: identity's account row
 * first, then billing's balance row. During a rolling deploy across sql/0020,
 * nodes of the previous version lock the account row and reach the balance row
 * after it, through the migration's trigger; taking the two in the same order
 * keeps a node of each version from holding the one the other waits for.
 */
const moneyLocks = Effect.gen(function* () {
  const accounts = yield* AccountsRepo
  const repo = yield* BillingRepo
  return {
    /** The account's row and its balance row, locked in that order by one statement. */
    account: (accountId: string) => repo.lockAccount(accountId, accounts.lockPart),
    /** The account row alone, for a write of the balance row that needs no figure first. */
    accountRow: accounts.lock
  }
})

/**
 * Prepaid balances over an append-only ledger: credits (top-ups, operator
 * grants, the signup credit) and debits (session egress). Every entry and its
 * balance change are written in one transaction with the account's row and
 * its balance row (`account_balances`) locked, so concurrent writers serialize
 * per account and the balance is always the ledger's sum.
 */
export class Billing extends Context.Service<
  Billing,
  {
    /** Applies a credit; `credited` is false when its provider payment was already applied. */
    readonly credit: (
      credit: Credit
    ) => Effect.Effect<{ readonly credited: boolean; readonly balance: bigint }>
    /** Charges an ended session's egress, as a part of the statement that ends it. */
    readonly chargePart: SessionPart<EndedFacts>
    readonly balance: (accountId: string) => Effect.Effect<bigint>
    readonly summary: (accountId: string) => Effect.Effect<BillingSummary>
    readonly setContact: (accountId: string, contact: BillingContactRequest) => Effect.Effect<BillingContact>
    /** The balance (micro-USD) below which a charge sends `balance.low`. */
    readonly setLowBalanceThreshold: (accountId: string, micro: bigint) => Effect.Effect<void>
  }
>()("rbs/billing/Billing") {
  static readonly layerNoDeps = Layer.effect(
    Billing,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* BillingRepo
      const identityRows = yield* AccountsRepo
      const outbox = yield* WebhookOutbox
      const locks = yield* moneyLocks

      const credit = Effect.fn("Billing.credit")(function* (input: Credit) {
        if (input.amount <= 0n) return yield* Effect.die(new Error("a credit must be positive"))
        const result = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const account = yield* locks.account(input.accountId)
              const balance = account.balance + input.amount
              const entry = yield* repo.append({
                id: Crypto.randomUUID(),
                accountId: input.accountId,
                kind: input.kind,
                amount: input.amount,
                balanceAfter: balance,
                description: input.description,
                provider: input.provider,
                providerPaymentId: input.providerPaymentId,
                at: yield* now
              })
              if (Option.isNone(entry)) return { credited: false, balance: account.balance }
              yield* repo.setAccountMoney(input.accountId, balance, account.carry)
              if (input.kind === "topup")
                yield* outbox.emit(input.accountId, "billing.topup_succeeded", {
                  amount_micro_usd: Number(input.amount),
                  balance_micro_usd: Number(balance),
                  provider: input.provider ?? null
                })
              return { credited: true, balance }
            })
          )
          .pipe(Sql.orDefect)
        if (result.credited) {
          yield* Metric.update(
            Metric.withAttributes(ledgerCredits, { kind: input.kind }),
            Number(input.amount)
          )
          yield* Effect.logInfo("billing.credited", {
            accountId: input.accountId,
            kind: input.kind,
            microUsd: String(input.amount)
          })
        }
        return result
      })

      // A test key's sessions are charged as a live key's: its mode labels what made a session (usage
      // and the session's record say it), it buys no traffic the balance does not pay for.
      // The account row first, then its balance row, as every writer of money takes them.
      const chargePart: SessionPart<EndedFacts> = (ended, prefix) =>
        Effect.gen(function* () {
          const locked = `${prefix}_account`
          const account = identityRows.lockPart(locked, ended)
          const charge = repo.chargePart(prefix, ended, locked, Crypto.randomUUID())
          const figures = sql(charge.figures)
          // Crossing the account's low-balance threshold, or reaching zero, is an event.
          const [depleted, low] = [`${prefix}_depleted`, `${prefix}_low`]
          const depletedEvent = yield* outbox.emitPart(
            `${prefix}_depleted_event`,
            depleted,
            "balance.depleted",
            sql`jsonb_build_object('balance_micro_usd', source.after, 'session_id', source.session_id)`
          )
          const lowEvent = yield* outbox.emitPart(
            `${prefix}_low_event`,
            low,
            "balance.low",
            sql`jsonb_build_object('balance_micro_usd', source.after, 'session_id', source.session_id,
              'threshold_micro_usd', source.threshold)`
          )
          return {
            ctes: sql`
              ${account}, ${charge.ctes},
              ${sql(depleted)} AS (SELECT * FROM ${figures} WHERE charge > 0 AND balance > 0 AND after <= 0),
              ${sql(low)} AS (
                SELECT * FROM ${figures}
                WHERE charge > 0 AND NOT (balance > 0 AND after <= 0) AND balance >= threshold AND after < threshold
              ), ${depletedEvent}, ${lowEvent}`,
            output: sql`SELECT charge FROM ${figures}`,
            after: (output) => {
              const charged = output === null || output === undefined ? 0 : Number(output)
              return charged > 0
                ? Metric.update(Metric.withAttributes(ledgerDebits, { kind: "session_egress" }), charged)
                : Effect.void
            }
          }
        })

      const summary = Effect.fn("Billing.summary")(function* (accountId: string) {
        const [balance, entries, contact, threshold] = yield* Effect.all(
          [
            repo.balance(accountId),
            repo.recent(accountId, RECENT_ENTRIES),
            repo.contact(accountId),
            repo.lowBalanceThreshold(accountId)
          ],
          { concurrency: "unbounded" }
        )
        return {
          object: "billing_summary",
          account_id: accountId,
          currency: "usd",
          balance_micro_usd: Number(balance),
          balance_usd: formatUsd(balance),
          egress_price: { usd_per_gb: 5, bytes_per_micro_usd: Number(BYTES_PER_MICRO_USD) },
          billing_contact: Option.match(contact, { onNone: () => null, onSome: toContact }),
          low_balance_threshold_micro_usd: Number(threshold),
          recent_entries: entries.map(toEntry)
        } satisfies BillingSummary
      })

      const setContact = Effect.fn("Billing.setContact")(function* (
        accountId: string,
        contact: BillingContactRequest
      ) {
        return toContact(yield* repo.upsertContact(accountId, contact, yield* now))
      })

      return Billing.of({
        credit,
        chargePart,
        balance: repo.balance,
        summary,
        setContact,
        setLowBalanceThreshold: (accountId, micro) =>
          sql
            .withTransaction(
              Effect.andThen(locks.accountRow(accountId), repo.setLowBalanceThreshold(accountId, micro))
            )
            .pipe(Sql.orDefect)
      })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(
    Layer.provideMerge(BillingRepo.layer),
    // The session's billed amount is the sessions' record, the account's row identity's; memoized,
    // one repository per build.
    Layer.provide(Layer.mergeAll(SessionsRepo.layer, AccountsRepo.layer))
  )

  /** New sessions need a balance above zero (checked in the admission transaction). */
  static readonly layerBalanceGate = Layer.effect(
    BalanceGate,
    Effect.gen(function* () {
      const locks = yield* moneyLocks
      return BalanceGate.of({
        // Whatever the key's mode: a test key's sessions are charged as a live key's.
        check: (owner) =>
          Effect.flatMap(locks.account(owner.accountId), (account) =>
            account.balance > 0n
              ? Effect.void
              : Effect.andThen(countRejection("balance"), Effect.fail(new PaymentRequired()))
          )
      })
    })
  )

  /** Credits `SIGNUP_CREDIT_USD` to every new account, once (keyed by the account's id). */
  static readonly layerSignupCredit = AccountHooks.add(
    Effect.gen(function* () {
      const amount = (yield* BillingConfig).signupCreditMicroUsd
      const billing = yield* Billing
      return (account) =>
        amount === 0n
          ? Effect.void
          : billing
              .credit({
                accountId: account.id,
                amount,
                kind: "signup_credit",
                description: "Signup credit",
                provider: "signup",
                providerPaymentId: account.id
              })
              .pipe(Effect.asVoid)
    })
  )

  /** Adds the egress charge to every session's ending. */
  static readonly layerSessionHooks = SessionHooks.add(
    Effect.map(
      Billing.useSync((billing) => billing.chargePart),
      (charge) => ({ endedParts: [charge] })
    )
  )
}
