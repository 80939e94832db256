-- An account's money, in a table billing owns (it was three columns of `accounts`, which identity
-- owns): the balance (the ledger's running total, written in the same transaction as each entry),
-- the egress bytes not charged yet, and the balance below which a charge sends `balance.low`. Same
-- types, defaults and checks as the columns. An account without a row has the defaults (no balance,
-- no carry, a 1 USD threshold, as a new account had before): billing's reads answer them, and billing
-- writes the row the first time it locks it (`INSERT ... ON CONFLICT DO NOTHING`, then
-- `SELECT ... FOR UPDATE`). While the triggers below exist, every account has its row from its insert
-- on; once they are dropped, accounts made afterwards get theirs that way.
CREATE TABLE account_balances (
  account_id uuid PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
  balance_micro_usd bigint NOT NULL DEFAULT 0,
  egress_carry_bytes bigint NOT NULL DEFAULT 0 CHECK (egress_carry_bytes >= 0),
  balance_low_threshold_micro_usd bigint NOT NULL DEFAULT 1000000
);

-- One balance for both versions during a rolling deploy. Nodes of the previous version, still
-- running beside this one against the same database, read and write only the old columns on
-- `accounts`; this version reads and writes only `account_balances`. Two triggers copy every write
-- of the three figures to the other side, inside the writing statement, so a top-up or a charge made
-- on a node of either version is seen by both and nothing is lost or charged twice.
--
-- Each copy writes only figures that differ from the other side's (`IS DISTINCT FROM`), so the copy
-- of a copy finds nothing to change and stops there: no trigger recursion, and an echo writes no row.
--
-- Both versions take the rows in the same order, so a node of each never deadlocks the other: the
-- previous version locks the account row (`FOR UPDATE`) and its update reaches the balance row
-- through the trigger; this version locks the account row through identity's `AccountsRepo.lock`
-- before it locks its balance row.
--
-- A later migration, once no node of the previous version is left, drops both triggers, their
-- functions and the three columns of `accounts`.
CREATE FUNCTION account_money_to_balances() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO account_balances AS b (account_id, balance_micro_usd, egress_carry_bytes, balance_low_threshold_micro_usd)
  VALUES (NEW.id, NEW.balance_micro_usd, NEW.egress_carry_bytes, NEW.balance_low_threshold_micro_usd)
  ON CONFLICT (account_id) DO UPDATE SET
    balance_micro_usd = excluded.balance_micro_usd,
    egress_carry_bytes = excluded.egress_carry_bytes,
    balance_low_threshold_micro_usd = excluded.balance_low_threshold_micro_usd
  WHERE (b.balance_micro_usd, b.egress_carry_bytes, b.balance_low_threshold_micro_usd)
    IS DISTINCT FROM (excluded.balance_micro_usd, excluded.egress_carry_bytes, excluded.balance_low_threshold_micro_usd);
  RETURN NULL;
END
$$;

CREATE FUNCTION account_balances_to_accounts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE accounts SET
    balance_micro_usd = NEW.balance_micro_usd,
    egress_carry_bytes = NEW.egress_carry_bytes,
    balance_low_threshold_micro_usd = NEW.balance_low_threshold_micro_usd
  WHERE id = NEW.account_id
    AND (balance_micro_usd, egress_carry_bytes, balance_low_threshold_micro_usd)
      IS DISTINCT FROM (NEW.balance_micro_usd, NEW.egress_carry_bytes, NEW.balance_low_threshold_micro_usd);
  RETURN NULL;
END
$$;

-- On insert too: an account made by a node of either version gets its balance row with it, holding
-- the account's figures, so billing's lazy insert (which would write the defaults) never runs while
-- the old columns exist. Creating this trigger locks `accounts` against writes until the migration
-- commits, so no write of an old node falls between it and the copy below.
CREATE TRIGGER accounts_money_to_balances
  AFTER INSERT OR UPDATE OF balance_micro_usd, egress_carry_bytes, balance_low_threshold_micro_usd ON accounts
  FOR EACH ROW EXECUTE FUNCTION account_money_to_balances();

-- Every account's money as it stands.
INSERT INTO account_balances (account_id, balance_micro_usd, egress_carry_bytes, balance_low_threshold_micro_usd)
SELECT id, balance_micro_usd, egress_carry_bytes, balance_low_threshold_micro_usd FROM accounts;

CREATE TRIGGER account_balances_to_accounts
  AFTER INSERT OR UPDATE OF balance_micro_usd, egress_carry_bytes, balance_low_threshold_micro_usd ON account_balances
  FOR EACH ROW EXECUTE FUNCTION account_balances_to_accounts();
