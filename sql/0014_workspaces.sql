-- Workspaces: what outlives a session. A directory on the node that owns it
-- (node_id): a browser's profile, or a sandbox's home. Snapshots of it are
-- tar + zstd archives in the blob store, so any node can restore one.
CREATE TABLE workspaces (
  id uuid PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  name text NOT NULL,
  session_type text CHECK (session_type IN ('browser', 'sandbox')),
  image text,
  template boolean NOT NULL DEFAULT false,
  -- Sessions keep their changes unless they say otherwise.
  persistence boolean NOT NULL DEFAULT true,
  source_workspace_id uuid,
  github_repo text,
  -- The node whose disk holds it; null until a session (or a clone, a restore, an import) made its disk.
  node_id text,
  -- ready; cloning, importing, restoring or snapshotting while a job works on it (held_by).
  status text NOT NULL DEFAULT 'ready',
  held_by text,
  -- The session whose runtime has the disk now: set before its runtime starts, cleared once its
  -- runtime is gone (after the row says closed). Jobs and the next session wait for it.
  mounted_by text,
  -- The disk's size when it was last measured (a session's end, a clone, a restore).
  used_bytes bigint NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  UNIQUE (account_id, name)
);

CREATE TABLE workspace_snapshots (
  id uuid PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  account_id uuid NOT NULL,
  name text NOT NULL,
  blob_key text NOT NULL,
  used_bytes bigint NOT NULL,
  created_at timestamptz NOT NULL,
  restored_at timestamptz,
  UNIQUE (workspace_id, name)
);

ALTER TABLE sessions ADD COLUMN workspace_id uuid;
ALTER TABLE sessions ADD COLUMN persistence boolean;

-- One open session per workspace, whatever races: the second insert fails.
CREATE UNIQUE INDEX sessions_workspace_open_idx ON sessions (workspace_id)
  WHERE workspace_id IS NOT NULL AND status IN ('creating', 'ready');
CREATE INDEX sessions_workspace_idx ON sessions (workspace_id, created_at DESC) WHERE workspace_id IS NOT NULL;
