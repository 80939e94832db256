-- Durable jobs: work that runs without a client holding a connection
-- (a screenshot, a PDF, a page's content, a command in a sandbox; later
-- snapshots, restores and imports). The engine on every node claims due jobs
-- with FOR UPDATE SKIP LOCKED and a lease (locked_until) it renews while the
-- job runs; every attempt is recorded before it runs.
CREATE TABLE jobs (
  id text PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  -- Who created it (OwnerSchema): the job acts as them, its sessions billed to their key.
  owner jsonb NOT NULL,
  kind text NOT NULL,
  input jsonb NOT NULL,
  state text NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
  attempts integer NOT NULL DEFAULT 0,
  -- Attempts it may take before it fails for good (a retry raises it).
  attempt_limit integer NOT NULL,
  -- Set only on a job that must run on one node (a workspace's disk lives there).
  node_id text,
  next_attempt_at timestamptz,
  locked_until timestamptz,
  locked_by text,
  -- The session of the running attempt, if it made one.
  session_id text,
  result jsonb,
  -- The result's bytes in the blob store (`jobs/<id>/result`), and the node whose store holds them.
  result_key text,
  result_content_type text,
  result_bytes bigint,
  result_node_id text,
  error_code text,
  error_message text,
  created_at timestamptz NOT NULL,
  started_at timestamptz,
  finished_at timestamptz,
  updated_at timestamptz NOT NULL
);
CREATE INDEX jobs_due_idx ON jobs (next_attempt_at) WHERE state IN ('queued', 'running');
CREATE INDEX jobs_account_idx ON jobs (account_id, created_at DESC, id DESC);

CREATE TABLE job_attempts (
  job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  number integer NOT NULL,
  node_id text NOT NULL,
  started_at timestamptz NOT NULL,
  -- Null while it runs (a node that died mid-attempt leaves it null until the lease runs out).
  finished_at timestamptz,
  outcome text CHECK (outcome IN ('succeeded', 'failed', 'cancelled', 'abandoned', 'interrupted', 'deferred')),
  error text,
  PRIMARY KEY (job_id, number)
);
