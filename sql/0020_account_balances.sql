-- An account's money, in a table billing owns (it was three columns of `accounts`, which identity
-- owns): the balance (the ledger's running total, written in the same transaction as each entry),
-- the egress bytes not charged yet, and the balance below which a charge sends `balance.low`. Same
-- types, defaults and checks as the columns. Billing writes the row of an account the first time it
-- locks it (`INSERT ... ON CONFLICT DO NOTHING`, then `SELECT ... FOR UPDATE`), so an account without
-- one has the defaults: no balance, no carry, a 1 USD threshold, as a new account had before.
CREATE TABLE account_balances (
  account_id uuid PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
  balance_micro_usd bigint NOT NULL DEFAULT 0,
  egress_carry_bytes bigint NOT NULL DEFAULT 0 CHECK (egress_carry_bytes >= 0),
  balance_low_threshold_micro_usd bigint NOT NULL DEFAULT 1000000
);

-- Every account's money as it stands. The columns on `accounts` stay, unread and unwritten by this
-- version: nodes of the previous version, still running beside this one during a rolling deploy
-- against the same database, read and write only those. From this migration on the two versions
-- keep separate totals (a top-up or a charge made by an old node is not seen by a new one), so a
-- roll should be short; a later migration drops the columns once no old node is left.
INSERT INTO account_balances (account_id, balance_micro_usd, egress_carry_bytes, balance_low_threshold_micro_usd)
SELECT id, balance_micro_usd, egress_carry_bytes, balance_low_threshold_micro_usd FROM accounts;
