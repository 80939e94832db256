import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import type * as Statement from "effect/sql/Statement"
import { BYTES_PER_MICRO_USD } from "./Money.ts"
import type { BillingContactRequest, LedgerKind } from "../../kernel/Billing.ts"
import { LedgerKind as LedgerKindSchema } from "../../kernel/Billing.ts"
import * as Sql from "../../platform/db/Sql.ts"

export const LedgerRow = Schema.Struct({
  id: Schema.String,
  account_id: Schema.String,
  kind: LedgerKindSchema,
  amount_micro_usd: Schema.BigInt,
  balance_after_micro_usd: Schema.BigInt,
  description: Schema.String,
  session_id: Schema.NullOr(Schema.String),
  provider: Schema.NullOr(Schema.String),
  provider_payment_id: Schema.NullOr(Schema.String),
  created_at: Schema.Date
})
export type LedgerRow = typeof LedgerRow.Type

export const CheckoutRow = Schema.Struct({
  id: Schema.String,
  account_id: Schema.String,
  created_by: Schema.NullOr(Schema.String),
  provider: Schema.String,
  provider_ref: Schema.NullOr(Schema.String),
  url: Schema.NullOr(Schema.String),
  amount_micro_usd: Schema.BigInt,
  status: Schema.Literals(["open", "completed"]),
  created_at: Schema.Date,
  completed_at: Schema.NullOr(Schema.Date)
})
export type CheckoutRow = typeof CheckoutRow.Type

export const ContactRow = Schema.Struct({
  account_id: Schema.String,
  name: Schema.NullOr(Schema.String),
  email: Schema.NullOr(Schema.String),
  address: Schema.NullOr(Schema.Unknown),
  tax_id: Schema.NullOr(Schema.String),
  updated_at: Schema.Date
})
export type ContactRow = typeof ContactRow.Type

const AccountMoney = Schema.Struct({
  balance_micro_usd: Schema.BigInt,
  egress_carry_bytes: Schema.BigInt
})

const decode = <S extends Schema.Top & { readonly DecodingServices: never }>(schema: S) =>
  Effect.flatMap(Schema.decodeUnknownEffect(Schema.Array(schema)))

export interface NewEntry {
  readonly id: string
  readonly accountId: string
  readonly kind: LedgerKind
  readonly amount: bigint
  readonly balanceAfter: bigint
  readonly description: string
  readonly sessionId?: string | undefined
  readonly provider?: string | undefined
  readonly providerPaymentId?: string | undefined
  readonly at: Date
}

/** SQL for the ledger, balances, checkouts and billing contacts. Failures here are defects. */
export class BillingRepo extends Context.Service<
  BillingRepo,
  {
    /**
     * Locks the account's balance row for the rest of the transaction (writing it first, with the
     * defaults, if the account has none yet): balance and carried egress bytes.
     */
    readonly lockAccount: (
      accountId: string,
      /**
       * Locks the account's own row first, in the same statement: the CTE `name` over the account
       * in the `account_id` of the CTE `source` (identity's `AccountsRepo.lockPart`).
       */
      accountRow?: (name: string, source: string) => Statement.Fragment
    ) => Effect.Effect<{ readonly balance: bigint; readonly carry: bigint }>
    readonly setAccountMoney: (accountId: string, balance: bigint, carry: bigint) => Effect.Effect<void>
    /**
     * A session's egress charge as a part of the statement that ends it (CTEs named
     * `<prefix>_...`): the bytes of the ended row (the CTE `ended`) with the account's carried
     * bytes, charged in whole micro-dollars, the rest carried, on the balance row of the account
     * the CTE `locked` holds (made with the defaults if missing, as `lockAccount` would), and
     * its ledger entry (`entryId`, at the row's `ended_at`). The session's billed amount follows
     * from the entry (sql/0031). `figures` names the CTE with the charge (`charge`, `after`, the
     * balance before, `threshold`, `account_id`, `session_id`); nothing when `ended` is empty.
     */
    readonly chargePart: (
      prefix: string,
      ended: string,
      locked: string,
      entryId: string
    ) => { readonly ctes: Statement.Fragment; readonly figures: string }
    /** Below this balance the account gets `balance.low` (default 1 USD). */
    readonly lowBalanceThreshold: (accountId: string) => Effect.Effect<bigint>
    readonly setLowBalanceThreshold: (accountId: string, micro: bigint) => Effect.Effect<void>
    /** Appends an entry; `None` when its provider payment is already in the ledger. */
    readonly append: (entry: NewEntry) => Effect.Effect<Option.Option<LedgerRow>>
    readonly recent: (accountId: string, limit: number) => Effect.Effect<ReadonlyArray<LedgerRow>>
    readonly balance: (accountId: string) => Effect.Effect<bigint>
    readonly contact: (accountId: string) => Effect.Effect<Option.Option<ContactRow>>
    readonly upsertContact: (
      accountId: string,
      contact: BillingContactRequest,
      at: Date
    ) => Effect.Effect<ContactRow>
    readonly insertCheckout: (checkout: {
      readonly id: string
      readonly accountId: string
      readonly userId: string | null
      readonly provider: string
      readonly amount: bigint
      readonly at: Date
    }) => Effect.Effect<CheckoutRow>
    readonly setCheckoutRef: (id: string, providerRef: string, url: string) => Effect.Effect<void>
    readonly findCheckout: (id: string) => Effect.Effect<Option.Option<CheckoutRow>>
    readonly findCheckoutByRef: (provider: string, ref: string) => Effect.Effect<Option.Option<CheckoutRow>>
    readonly completeCheckout: (id: string, at: Date) => Effect.Effect<void>
  }
>()("rbs/billing/BillingRepo") {
  static readonly layer = Layer.effect(
    BillingRepo,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient

      // An account's balance row is written the first time billing locks it (sql/0020): the lock
      // reads it first, and only an account without one (made while no trigger wrote it) pays the
      // insert and a second read. The insert of a concurrent first lock waits for the other's
      // commit and then does nothing, so both lock the one row. An account that does not exist
      // fails the insert's foreign key: a defect, as its lock was before.
      const ensureRow = (accountId: string) =>
        sql`INSERT INTO account_balances (account_id) VALUES (${accountId}) ON CONFLICT (account_id) DO NOTHING`

      const lockRow = <A, E>(accountId: string, read: Effect.Effect<ReadonlyArray<A>, E>) => {
        const found = (rows: ReadonlyArray<A>) =>
          rows[0] === undefined
            ? Effect.die(new Error(`account ${accountId} does not exist`))
            : Effect.succeed(rows[0])
        return Effect.flatMap(read, (rows) =>
          rows[0] !== undefined
            ? Effect.succeed(rows[0])
            : ensureRow(accountId).pipe(Effect.andThen(read), Effect.flatMap(found))
        )
      }

      const lockAccount = (
        accountId: string,
        accountRow?: (name: string, source: string) => Statement.Fragment
      ) =>
        lockRow(
          accountId,
          (accountRow === undefined
            ? sql`
                SELECT balance_micro_usd, egress_carry_bytes FROM account_balances
                WHERE account_id = ${accountId} FOR UPDATE`
            : // The account's row, then its balance row: one round trip, the locks in that order.
              sql`
                WITH rbs_whose AS (SELECT ${accountId}::uuid AS account_id), ${accountRow("rbs_account", "rbs_whose")}
                SELECT balance_micro_usd, egress_carry_bytes FROM account_balances
                WHERE account_id = (SELECT id FROM rbs_account) FOR UPDATE`
          ).pipe(decode(AccountMoney))
        ).pipe(Effect.map((row) => ({ balance: row.balance_micro_usd, carry: row.egress_carry_bytes })))

      // `chargeEgress` (Money.ts) in SQL: under the account's lock, no other writer moves the row.
      const chargePart = (prefix: string, ended: string, locked: string, entryId: string) => {
        const [held, figures] = [sql(`${prefix}_held`), sql(`${prefix}_figures`)]
        const price = sql`${BYTES_PER_MICRO_USD}::bigint`
        return {
          figures: `${prefix}_figures`,
          ctes: sql`
            ${held} AS (
              SELECT balance_micro_usd, egress_carry_bytes, balance_low_threshold_micro_usd FROM account_balances
              WHERE account_id = (SELECT id FROM ${sql(locked)}) FOR UPDATE
            ), ${sql(`${prefix}_before`)} AS (
              SELECT l.id AS account_id, e.id AS session_id, e.ended_at, e.bytes_up + e.bytes_down AS bytes,
                coalesce(h.balance_micro_usd, 0) AS balance,
                coalesce(h.balance_low_threshold_micro_usd, 1000000) AS threshold,
                coalesce(h.egress_carry_bytes, 0) + e.bytes_up + e.bytes_down AS total,
                h.egress_carry_bytes AS carried
              FROM ${sql(locked)} l CROSS JOIN ${sql(ended)} e LEFT JOIN ${held} h ON true
            ), ${figures} AS (
              SELECT *, total / ${price} AS charge, total % ${price} AS carry, balance - total / ${price} AS after
              FROM ${sql(`${prefix}_before`)}
            ), ${sql(`${prefix}_money`)} AS (
              INSERT INTO account_balances AS b (account_id, balance_micro_usd, egress_carry_bytes)
              SELECT account_id, after, carry FROM ${figures}
              WHERE charge > 0 OR carried IS DISTINCT FROM carry
              ON CONFLICT (account_id) DO UPDATE
                SET balance_micro_usd = EXCLUDED.balance_micro_usd, egress_carry_bytes = EXCLUDED.egress_carry_bytes
            ), ${sql(`${prefix}_ledger`)} AS (
              INSERT INTO ledger_entries (id, account_id, kind, amount_micro_usd, balance_after_micro_usd, description,
                session_id, created_at)
              SELECT ${entryId}::uuid, account_id, 'session_egress', -charge, after,
                'Egress of ' || session_id || ': ' || bytes || ' bytes', session_id, ended_at
              FROM ${figures} WHERE charge > 0
            )`
        }
      }

      const setAccountMoney = (accountId: string, balance: bigint, carry: bigint) =>
        sql`
          UPDATE account_balances SET balance_micro_usd = ${balance}, egress_carry_bytes = ${carry}
          WHERE account_id = ${accountId}`.pipe(Effect.asVoid)

      const append = (entry: NewEntry) =>
        sql`
          INSERT INTO ledger_entries (id, account_id, kind, amount_micro_usd, balance_after_micro_usd, description,
            session_id, provider, provider_payment_id, created_at)
          VALUES (${entry.id}, ${entry.accountId}, ${entry.kind}, ${entry.amount}, ${entry.balanceAfter},
            ${entry.description}, ${entry.sessionId ?? null}, ${entry.provider ?? null},
            ${entry.providerPaymentId ?? null}, ${entry.at})
          ON CONFLICT (provider, provider_payment_id) WHERE provider_payment_id IS NOT NULL DO NOTHING
          RETURNING *`.pipe(
          decode(LedgerRow),
          Effect.map((rows) => Option.fromNullishOr(rows[0]))
        )

      const recent = (accountId: string, limit: number) =>
        sql`
          SELECT * FROM ledger_entries WHERE account_id = ${accountId}
          ORDER BY created_at DESC, id DESC LIMIT ${limit}`.pipe(decode(LedgerRow))

      // Reads need no row: an account billing has not locked yet has the defaults.
      const balance = (accountId: string) =>
        sql<{ readonly balance: string }>`
          SELECT balance_micro_usd::text AS balance FROM account_balances WHERE account_id = ${accountId}`.pipe(
          Effect.map((rows) => BigInt(rows[0]?.balance ?? "0"))
        )

      const contact = (accountId: string) =>
        sql`SELECT * FROM billing_contacts WHERE account_id = ${accountId}`.pipe(
          decode(ContactRow),
          Effect.map((rows) => Option.fromNullishOr(rows[0]))
        )

      const upsertContact = (accountId: string, c: BillingContactRequest, at: Date) => {
        // Absent fields keep their value; null clears.
        const keep = (key: keyof BillingContactRequest) => (key in c ? 0 : 1)
        const address = c.address === undefined || c.address === null ? null : JSON.stringify(c.address)
        return sql`
          INSERT INTO billing_contacts (account_id, name, email, address, tax_id, updated_at)
          VALUES (${accountId}, ${c.name ?? null}, ${c.email ?? null}, ${address}::jsonb, ${c.tax_id ?? null}, ${at})
          ON CONFLICT (account_id) DO UPDATE SET
            name = CASE WHEN ${keep("name")} = 1 THEN billing_contacts.name ELSE excluded.name END,
            email = CASE WHEN ${keep("email")} = 1 THEN billing_contacts.email ELSE excluded.email END,
            address = CASE WHEN ${keep("address")} = 1 THEN billing_contacts.address ELSE excluded.address END,
            tax_id = CASE WHEN ${keep("tax_id")} = 1 THEN billing_contacts.tax_id ELSE excluded.tax_id END,
            updated_at = excluded.updated_at
          RETURNING *`.pipe(
          decode(ContactRow),
          Effect.map((rows) => rows[0]!)
        )
      }

      const insertCheckout = (checkout: Parameters<BillingRepo["Service"]["insertCheckout"]>[0]) =>
        sql`
          INSERT INTO checkouts (id, account_id, created_by, provider, amount_micro_usd, status, created_at)
          VALUES (${checkout.id}, ${checkout.accountId}, ${checkout.userId}, ${checkout.provider}, ${checkout.amount},
            'open', ${checkout.at})
          RETURNING *`.pipe(
          decode(CheckoutRow),
          Effect.map((rows) => rows[0]!)
        )

      const setCheckoutRef = (id: string, providerRef: string, url: string) =>
        sql`UPDATE checkouts SET provider_ref = ${providerRef}, url = ${url} WHERE id = ${id}`.pipe(
          Effect.asVoid
        )

      const findCheckout = (id: string) =>
        sql`SELECT * FROM checkouts WHERE id = ${id}`.pipe(
          decode(CheckoutRow),
          Effect.map((rows) => Option.fromNullishOr(rows[0]))
        )

      const findCheckoutByRef = (provider: string, ref: string) =>
        sql`SELECT * FROM checkouts WHERE provider = ${provider} AND provider_ref = ${ref}`.pipe(
          decode(CheckoutRow),
          Effect.map((rows) => Option.fromNullishOr(rows[0]))
        )

      const completeCheckout = (id: string, at: Date) =>
        sql`UPDATE checkouts SET status = 'completed', completed_at = ${at} WHERE id = ${id} AND status = 'open'`.pipe(
          Effect.asVoid
        )

      const setLowBalanceThreshold = (accountId: string, micro: bigint) =>
        sql`
          INSERT INTO account_balances (account_id, balance_low_threshold_micro_usd) VALUES (${accountId}, ${micro})
          ON CONFLICT (account_id) DO UPDATE SET balance_low_threshold_micro_usd = excluded.balance_low_threshold_micro_usd`.pipe(
          Effect.asVoid
        )

      const lowBalanceThreshold = (accountId: string) =>
        sql<{ readonly threshold: string }>`
          SELECT balance_low_threshold_micro_usd::text AS threshold FROM account_balances
          WHERE account_id = ${accountId}`.pipe(Effect.map((rows) => BigInt(rows[0]?.threshold ?? "1000000")))

      return BillingRepo.of({
        // A fragment to compose, not a statement to run: left as it is.
        chargePart,
        ...Sql.defects({
          lockAccount,
          setAccountMoney,
          setLowBalanceThreshold,
          lowBalanceThreshold,
          append,
          recent,
          balance,
          contact,
          upsertContact,
          insertCheckout,
          setCheckoutRef,
          findCheckout,
          findCheckoutByRef,
          completeCheckout
        })
      })
    })
  )
}
