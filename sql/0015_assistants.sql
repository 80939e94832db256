-- Assistants: agents that live on the platform. Each has a home workspace (a
-- sandbox workspace with assistant_home) and, while running, a sandbox session
-- on it that runs its runtime; the runtime calls back with a short-lived token
-- bound to that session.
ALTER TABLE workspaces ADD COLUMN assistant_home boolean NOT NULL DEFAULT false;

-- An assistant's runtime acts, and the audit trail names it.
ALTER TABLE audit_events DROP CONSTRAINT audit_events_actor_type_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_actor_type_check
  CHECK (actor_type IN ('user', 'api_key', 'service_account', 'system', 'assistant'));

CREATE TABLE assistants (
  id uuid PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  name text NOT NULL,
  image text,
  config jsonb NOT NULL DEFAULT '{}',
  -- Bumped on every change of config: an intent applies only to the version it was proposed on.
  config_version integer NOT NULL DEFAULT 1,
  -- running: its runtime should be up (the supervisor starts a session when it has none);
  -- paused: its runtime is stopped, its workspace kept.
  status text NOT NULL CHECK (status IN ('running', 'paused')),
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  -- The session its runtime runs in now; the runtime's token is valid only for this one.
  session_id text,
  -- The runtime's last start failure, shown until a start succeeds.
  last_error text,
  restarts integer NOT NULL DEFAULT 0,
  -- A node starting its runtime holds it until then (another node leaves it alone).
  start_lease_until timestamptz,
  runtime_state jsonb NOT NULL DEFAULT '{}',
  -- The runtime state's ETag: bumped by every write.
  state_version bigint NOT NULL DEFAULT 1,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  UNIQUE (account_id, name)
);
CREATE INDEX assistants_supervise_idx ON assistants (status) WHERE status = 'running';

-- The vault: values encrypted at rest (AES-256-GCM, as webhook secrets), never returned by a list
-- or a get; an assistant's own runtime resolves them. assistant_id null: every assistant of the
-- account may resolve it (an assistant's own value of the same name wins).
CREATE TABLE assistant_credentials (
  id uuid PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  assistant_id uuid REFERENCES assistants (id) ON DELETE CASCADE,
  name text NOT NULL,
  value_ciphertext text NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
CREATE UNIQUE INDEX assistant_credentials_name_idx
  ON assistant_credentials (account_id, coalesce(assistant_id, '00000000-0000-0000-0000-000000000000'::uuid), name);

CREATE TABLE assistant_channels (
  id uuid PRIMARY KEY,
  assistant_id uuid NOT NULL REFERENCES assistants (id) ON DELETE CASCADE,
  account_id uuid NOT NULL,
  kind text NOT NULL,
  name text NOT NULL,
  config jsonb NOT NULL DEFAULT '{}',
  secret_ciphertext text,
  created_at timestamptz NOT NULL,
  UNIQUE (assistant_id, name)
);

CREATE TABLE assistant_usage_events (
  id uuid PRIMARY KEY,
  assistant_id uuid NOT NULL REFERENCES assistants (id) ON DELETE CASCADE,
  account_id uuid NOT NULL,
  model text NOT NULL,
  input_tokens bigint NOT NULL,
  output_tokens bigint NOT NULL,
  cost_micro_usd bigint,
  metadata jsonb NOT NULL DEFAULT '{}',
  occurred_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL
);
CREATE INDEX assistant_usage_events_page_idx ON assistant_usage_events (assistant_id, created_at DESC, id DESC);
CREATE INDEX assistant_usage_events_account_idx ON assistant_usage_events (account_id, occurred_at);

CREATE TABLE assistant_config_intents (
  id uuid PRIMARY KEY,
  assistant_id uuid NOT NULL REFERENCES assistants (id) ON DELETE CASCADE,
  account_id uuid NOT NULL,
  -- The change: a JSON merge patch (RFC 7396) of the assistant's config.
  patch jsonb NOT NULL,
  reason text,
  base_version integer NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
  -- Who proposed it and who decided: an actor's type and id (the runtime: assistant:<id>).
  proposed_by text NOT NULL,
  decided_by text,
  -- The config version an approval made.
  applied_version integer,
  decision_note text,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  decided_at timestamptz
);
CREATE INDEX assistant_config_intents_page_idx ON assistant_config_intents (assistant_id, created_at DESC, id DESC);
CREATE INDEX assistant_config_intents_pending_idx ON assistant_config_intents (expires_at) WHERE status = 'pending';

-- A person's identity at a provider, linked to an assistant through the assistant sign-in.
CREATE TABLE assistant_links (
  id uuid PRIMARY KEY,
  assistant_id uuid NOT NULL REFERENCES assistants (id) ON DELETE CASCADE,
  account_id uuid NOT NULL,
  provider text NOT NULL,
  subject text NOT NULL,
  email text,
  linked_by text,
  created_at timestamptz NOT NULL,
  UNIQUE (assistant_id, provider, subject)
);

-- An assistant sign-in under way: begun by login-url, taken (once) by the callback within ten minutes.
CREATE TABLE assistant_link_flows (
  state text PRIMARY KEY,
  provider text NOT NULL,
  assistant_id uuid NOT NULL REFERENCES assistants (id) ON DELETE CASCADE,
  account_id uuid NOT NULL,
  code_verifier text NOT NULL,
  nonce text NOT NULL,
  redirect_uri text NOT NULL,
  created_at timestamptz NOT NULL
);
