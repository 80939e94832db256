-- Prepaid billing. Money is integer micro-USD (1,000,000 = 1 USD). The ledger is
-- the record; the balance on the account is its running total, updated in the
-- same transaction as each entry.
ALTER TABLE accounts ADD COLUMN balance_micro_usd bigint NOT NULL DEFAULT 0;

-- Egress bytes not charged yet: a charge is whole micro-dollars (200 bytes
-- each), and what is left of a session carries over to the account's next one.
ALTER TABLE accounts ADD COLUMN egress_carry_bytes bigint NOT NULL DEFAULT 0 CHECK (egress_carry_bytes >= 0);

-- What a session's egress was charged, written with its ending.
ALTER TABLE sessions ADD COLUMN billed_micro_usd bigint NOT NULL DEFAULT 0;

CREATE TABLE ledger_entries (
  id uuid PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES accounts (id),
  kind text NOT NULL CHECK (kind IN ('topup', 'grant', 'signup_credit', 'session_egress')),
  amount_micro_usd bigint NOT NULL CHECK (amount_micro_usd <> 0),
  balance_after_micro_usd bigint NOT NULL,
  description text NOT NULL,
  session_id text REFERENCES sessions (id),
  provider text,
  provider_payment_id text,
  created_at timestamptz NOT NULL,
  CHECK ((kind = 'session_egress') = (amount_micro_usd < 0)),
  CHECK ((kind = 'session_egress') = (session_id IS NOT NULL))
);

-- A payment credits once, however often its provider tells us.
CREATE UNIQUE INDEX ledger_entries_payment_key ON ledger_entries (provider, provider_payment_id)
  WHERE provider_payment_id IS NOT NULL;

-- A session is charged once.
CREATE UNIQUE INDEX ledger_entries_session_key ON ledger_entries (session_id) WHERE session_id IS NOT NULL;

CREATE INDEX ledger_entries_account_idx ON ledger_entries (account_id, created_at DESC, id DESC);

CREATE FUNCTION ledger_entries_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'ledger_entries is append-only';
END
$$;

CREATE TRIGGER ledger_entries_append_only BEFORE UPDATE OR DELETE ON ledger_entries
  FOR EACH ROW EXECUTE FUNCTION ledger_entries_append_only();

-- Top-ups on their way through a payment provider.
CREATE TABLE checkouts (
  id uuid PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES accounts (id),
  created_by uuid REFERENCES users (id) ON DELETE SET NULL,
  provider text NOT NULL,
  provider_ref text,
  url text,
  amount_micro_usd bigint NOT NULL CHECK (amount_micro_usd > 0),
  status text NOT NULL CHECK (status IN ('open', 'completed')),
  created_at timestamptz NOT NULL,
  completed_at timestamptz
);

CREATE UNIQUE INDEX checkouts_provider_ref_key ON checkouts (provider, provider_ref) WHERE provider_ref IS NOT NULL;

-- Who pays: the billing contact shown on invoices.
CREATE TABLE billing_contacts (
  account_id uuid PRIMARY KEY REFERENCES accounts (id),
  name text,
  email text,
  address jsonb,
  tax_id text,
  updated_at timestamptz NOT NULL
)
;

-- GET /v1/usage: an account's sessions of a month, summed without visiting the table.
CREATE INDEX sessions_usage_idx ON sessions (account_id, created_at)
  INCLUDE (region, api_key_id, bytes_up, bytes_down, billed_micro_usd)
