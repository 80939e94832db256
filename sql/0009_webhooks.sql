-- Lifecycle webhooks. Endpoints per account (the signing secret encrypted at
-- rest); an outbox of events, written in the transaction of the change each
-- describes; one delivery per (event, endpoint), fanned out in that same
-- transaction; and each delivery's attempts. Workers on every node claim due
-- deliveries with FOR UPDATE SKIP LOCKED and a lease (locked_until).
CREATE TABLE webhooks (
  id text PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  url text NOT NULL,
  events text[] NOT NULL,
  description text,
  secret_ciphertext text NOT NULL,
  secret_preview text NOT NULL,
  -- A rotated secret keeps signing beside the new one until then.
  previous_secret_ciphertext text,
  previous_secret_until timestamptz,
  -- A 410 Gone from the endpoint disables it.
  disabled_at timestamptz,
  disabled_reason text,
  -- The circuit breaker: failures in a row, and until when deliveries wait.
  consecutive_failures integer NOT NULL DEFAULT 0,
  circuit_open_until timestamptz,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
CREATE INDEX webhooks_account_idx ON webhooks (account_id, created_at);

CREATE TABLE webhook_events (
  id text PRIMARY KEY,
  account_id uuid NOT NULL,
  type text NOT NULL,
  data jsonb NOT NULL,
  created_at timestamptz NOT NULL
);
CREATE INDEX webhook_events_created_idx ON webhook_events (created_at);

CREATE TABLE webhook_deliveries (
  id text PRIMARY KEY,
  webhook_id text NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
  event_id text NOT NULL REFERENCES webhook_events (id),
  account_id uuid NOT NULL,
  event_type text NOT NULL,
  state text NOT NULL CHECK (state IN ('pending', 'delivering', 'succeeded', 'failed', 'discarded')),
  -- A replay starts a new series; `attempts` counts the current one's.
  series integer NOT NULL DEFAULT 1,
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz,
  locked_until timestamptz,
  locked_by text,
  last_status integer,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  UNIQUE (event_id, webhook_id)
);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at)
  WHERE state IN ('pending', 'delivering');
CREATE INDEX webhook_deliveries_account_idx ON webhook_deliveries (account_id, created_at DESC, id DESC);

CREATE TABLE webhook_attempts (
  delivery_id text NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
  series integer NOT NULL,
  number integer NOT NULL,
  node_id text NOT NULL,
  started_at timestamptz NOT NULL,
  -- Null until the attempt has an outcome (a node that died mid-attempt leaves it null).
  finished_at timestamptz,
  duration_ms integer,
  status_code integer,
  error text,
  response_excerpt text,
  PRIMARY KEY (delivery_id, series, number)
);

-- `balance.low` fires when a charge takes the balance below this (default 1 USD).
ALTER TABLE accounts ADD COLUMN balance_low_threshold_micro_usd bigint NOT NULL DEFAULT 1000000;

-- What is in flight to an endpoint (the claim's per-endpoint bound).
CREATE INDEX webhook_deliveries_webhook_idx ON webhook_deliveries (webhook_id, state);
