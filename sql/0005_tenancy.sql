-- Teams and safe keys: organizations with roles, service accounts, scoped and
-- test-mode keys, SSH keys, OpenID Connect logins and the audit trail.

ALTER TABLE account_members DROP CONSTRAINT account_members_role_check;
ALTER TABLE account_members ADD CONSTRAINT account_members_role_check
  CHECK (role IN ('owner', 'admin', 'member', 'viewer'));

CREATE INDEX account_members_user_idx ON account_members (user_id);

-- Organization names are what `X-Service-Account` matches exactly, so they are
-- unique (ignoring case); personal accounts carry their owner's email.
CREATE UNIQUE INDEX accounts_organization_name_key ON accounts (lower(name)) WHERE kind = 'organization';

-- A non-human member of an account. Its keys act as it, whoever made them.
CREATE TABLE service_accounts (
  id uuid PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  name text NOT NULL,
  role text NOT NULL CHECK (role IN ('admin', 'member', 'viewer')),
  created_by uuid REFERENCES users (id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL,
  deleted_at timestamptz
);

CREATE INDEX service_accounts_account_idx ON service_accounts (account_id, created_at);

-- A key acts either as the user who made it (while they are a member) or as
-- its service account; `scopes` NULL is full access; `mode` test is never charged.
ALTER TABLE api_keys ALTER COLUMN created_by DROP NOT NULL;
ALTER TABLE api_keys DROP CONSTRAINT api_keys_created_by_fkey;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_created_by_fkey
  FOREIGN KEY (created_by) REFERENCES users (id) ON DELETE SET NULL;
ALTER TABLE api_keys ADD COLUMN service_account_id uuid REFERENCES service_accounts (id);
ALTER TABLE api_keys ADD COLUMN scopes text[];
ALTER TABLE api_keys ADD COLUMN mode text NOT NULL DEFAULT 'live' CHECK (mode IN ('live', 'test'));
-- The key a rotation replaced this one with.
ALTER TABLE api_keys ADD COLUMN replaced_by uuid REFERENCES api_keys (id);

-- Sessions of test-mode keys are metered and reported, never charged.
ALTER TABLE sessions ADD COLUMN live boolean NOT NULL DEFAULT true;

-- OpenID Connect: users may have no password, and are linked to provider subjects.
ALTER TABLE users ALTER COLUMN password_hash DROP NOT NULL;
ALTER TABLE users ADD COLUMN name text;
-- "Log out everywhere": web sessions and access tokens issued before this stop working.
ALTER TABLE users ADD COLUMN tokens_valid_after timestamptz;

CREATE TABLE user_identities (
  provider text NOT NULL,
  subject text NOT NULL,
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  email text,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (provider, subject)
);

-- A login in flight at a provider: what the callback must see again (state,
-- PKCE verifier, nonce). One use, ten minutes.
CREATE TABLE oidc_logins (
  state text PRIMARY KEY,
  provider text NOT NULL,
  code_verifier text NOT NULL,
  nonce text NOT NULL,
  redirect_uri text NOT NULL,
  -- Where the browser goes after the login: a path on this service, or NULL.
  return_to text,
  created_at timestamptz NOT NULL
);

CREATE TABLE ssh_keys (
  id uuid PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  name text,
  public_key text NOT NULL,
  key_type text NOT NULL,
  fingerprint text NOT NULL,
  created_by uuid REFERENCES users (id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL,
  last_used_at timestamptz,
  UNIQUE (account_id, fingerprint)
);

-- Every mutation, written in the transaction of the change it records.
CREATE TABLE audit_events (
  id uuid PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  occurred_at timestamptz NOT NULL,
  actor_type text NOT NULL CHECK (actor_type IN ('user', 'api_key', 'service_account', 'system')),
  actor_id text,
  actor_user_id uuid,
  action text NOT NULL,
  target_type text NOT NULL,
  target_id text,
  ip text,
  user_agent text,
  outcome text NOT NULL CHECK (outcome IN ('success', 'failure')),
  details jsonb NOT NULL DEFAULT '{}'
);

CREATE INDEX audit_events_account_idx ON audit_events (account_id, occurred_at DESC, id DESC);
CREATE INDEX audit_events_retention_idx ON audit_events (occurred_at);
