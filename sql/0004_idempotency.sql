-- Idempotency-Key records (Stripe semantics): the first response to a key is
-- kept for 24 hours and returned to every retry with the same request body.
CREATE TABLE idempotency_keys (
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  route text NOT NULL,
  key text NOT NULL,
  request_hash bytea NOT NULL,
  response_status integer NOT NULL,
  response_body jsonb NOT NULL,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (account_id, route, key)
);

CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at)
