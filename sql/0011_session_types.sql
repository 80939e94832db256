-- Sessions of two kinds: a browser (Chromium over CDP) or a sandbox (an OCI
-- container with exec, PTY and files). Each node has a capacity of each kind
-- (MAX_BROWSERS, MAX_SANDBOXES), carried by its heartbeat; placement counts
-- a node's open sessions of the kind asked for.
ALTER TABLE sessions ADD COLUMN session_type text NOT NULL DEFAULT 'browser'
  CHECK (session_type IN ('browser', 'sandbox'));

-- The sandbox's image, as named on create (null for a browser).
ALTER TABLE sessions ADD COLUMN image text;

ALTER TABLE nodes ADD COLUMN sandbox_capacity integer NOT NULL DEFAULT 0;

DROP INDEX sessions_open_idx;

CREATE INDEX sessions_open_idx ON sessions (node_id, session_type) WHERE status IN ('creating', 'ready')
