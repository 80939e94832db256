-- The accounts' sandbox images, pulled from registries through the API (POST /v1/images): each
-- kept whole in the blob store once pulled, so any node fetches and unpacks it on first use.
-- Registry credentials are kept sealed while the pull runs and erased when it ends.
CREATE TABLE images (
  id text PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  name text NOT NULL,
  reference text NOT NULL,
  status text NOT NULL CHECK (status IN ('pulling', 'ready', 'failed')),
  digest text,
  bytes bigint,
  error_code text,
  error_message text,
  credentials_sealed text,
  pulled_by text,
  locked_until timestamptz,
  created_at timestamptz NOT NULL,
  ready_at timestamptz
);
CREATE UNIQUE INDEX images_account_name ON images (account_id, name);
CREATE INDEX images_account ON images (account_id, created_at DESC, id DESC);
CREATE INDEX images_pulling ON images (locked_until) WHERE status = 'pulling';

-- The account's image a sandbox session runs (`image` at create naming one of the account's):
-- its id, so the launch finds that very image, never a node's image of the same name.
ALTER TABLE sessions ADD COLUMN image_id text;
