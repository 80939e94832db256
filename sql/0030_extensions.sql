-- The accounts' browser extensions (Manifest V3 zips, each kept in the blob store), and the
-- ones each session loads.
CREATE TABLE extensions (
  id text PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  name text NOT NULL,
  version text NOT NULL,
  manifest_version integer NOT NULL,
  files integer NOT NULL,
  bytes bigint NOT NULL,
  sha256 text NOT NULL,
  created_at timestamptz NOT NULL
);
CREATE INDEX extensions_account ON extensions (account_id, created_at DESC, id DESC);

ALTER TABLE sessions ADD COLUMN extension_ids jsonb NOT NULL DEFAULT '[]'::jsonb;
