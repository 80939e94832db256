-- A browser session's log: what its pages and clients did, written in batches by the node that runs
-- it. `session_logs` is one row a session (its totals, and when its log may be deleted once the
-- session has ended); `session_log_events` its events in order.
ALTER TABLE sessions ADD COLUMN logs boolean NOT NULL DEFAULT true;

CREATE TABLE session_logs (
  session_id text PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  events integer NOT NULL DEFAULT 0,
  bytes bigint NOT NULL DEFAULT 0,
  complete boolean NOT NULL DEFAULT false,
  -- When its last events were written, and (once complete) when it may be deleted.
  written_at timestamptz NOT NULL,
  expires_at timestamptz
);
CREATE INDEX session_logs_account ON session_logs (account_id);
CREATE INDEX session_logs_expires ON session_logs (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE session_log_events (
  session_id text NOT NULL REFERENCES session_logs (session_id) ON DELETE CASCADE,
  seq integer NOT NULL,
  at timestamptz NOT NULL,
  kind text NOT NULL,
  data jsonb NOT NULL,
  PRIMARY KEY (session_id, seq)
);
