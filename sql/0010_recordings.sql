-- Session recordings. A session created with `recording: true` spools its
-- screencast's frames on the node that runs it; when it ends, that node
-- encodes them into a WebM in the blob store. The row says how far it got.
ALTER TABLE sessions ADD COLUMN recording boolean NOT NULL DEFAULT false;

CREATE TABLE recordings (
  session_id text PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  status text NOT NULL CHECK (status IN ('recording', 'processing', 'ready', 'failed')),
  -- The node holding the spool (and, with a blob store of its own, the video).
  node_id text NOT NULL,
  node_url text,
  content_type text NOT NULL,
  blob_key text,
  frames integer NOT NULL DEFAULT 0,
  bytes bigint,
  duration_ms bigint,
  error text,
  created_at timestamptz NOT NULL,
  ready_at timestamptz
);

CREATE INDEX recordings_unfinished_idx ON recordings (node_id) WHERE status IN ('recording', 'processing');

CREATE INDEX recordings_ready_idx ON recordings (node_id, ready_at) WHERE status = 'ready'
