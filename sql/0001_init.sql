-- Identity: users, their accounts, dashboard sessions and API keys.
CREATE TABLE users (
  id uuid PRIMARY KEY,
  email text NOT NULL,
  password_hash text NOT NULL,
  created_at timestamptz NOT NULL
);

CREATE UNIQUE INDEX users_email_key ON users (lower(email));

-- A user's personal account, and later organizations.
CREATE TABLE accounts (
  id uuid PRIMARY KEY,
  name text NOT NULL,
  kind text NOT NULL CHECK (kind IN ('personal', 'organization')),
  created_at timestamptz NOT NULL
);

CREATE TABLE account_members (
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  role text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
  joined_at timestamptz NOT NULL,
  PRIMARY KEY (account_id, user_id)
);

-- Dashboard logins behind the service_session cookie; the cookie value is stored as SHA-256.
CREATE TABLE web_sessions (
  token_hash bytea PRIMARY KEY,
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL
);

CREATE INDEX web_sessions_user_idx ON web_sessions (user_id);

CREATE TABLE api_keys (
  id uuid PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  created_by uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  name text NOT NULL,
  prefix text NOT NULL,
  secret_hash bytea NOT NULL UNIQUE,
  created_at timestamptz NOT NULL,
  last_used_at timestamptz,
  revoked_at timestamptz
);

CREATE INDEX api_keys_account_idx ON api_keys (account_id, created_at DESC);

-- Browser sessions. The row is the source of truth; the Session entity owns the live browser.
CREATE TABLE sessions (
  id text PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  api_key_id uuid REFERENCES api_keys (id) ON DELETE SET NULL,
  status text NOT NULL CHECK (status IN ('creating', 'ready', 'closed', 'error')),
  profile text NOT NULL,
  device text NOT NULL,
  ttl_seconds integer NOT NULL,
  bytes_up bigint NOT NULL DEFAULT 0,
  bytes_down bigint NOT NULL DEFAULT 0,
  proxy_ip text,
  proxy_region text,
  node_id text NOT NULL,
  created_at timestamptz NOT NULL,
  ready_at timestamptz,
  expires_at timestamptz NOT NULL,
  ended_at timestamptz,
  ended_reason text
);

CREATE INDEX sessions_account_created_idx ON sessions (account_id, created_at DESC, id DESC);

CREATE INDEX sessions_open_idx ON sessions (node_id) WHERE status IN ('creating', 'ready')
