-- The egress region a session asked for (proxy_region is set from it once the session is ready).
ALTER TABLE sessions ADD COLUMN region text NOT NULL DEFAULT 'local';

-- The concurrency cap counts an account's open sessions inside the create transaction.
CREATE INDEX sessions_account_open_idx ON sessions (account_id) WHERE status IN ('creating', 'ready')
