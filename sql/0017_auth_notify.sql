-- Every node keeps keys that authenticated for a few seconds (src/features/identity/KeyCache.ts). A change that
-- could end or narrow a key's authority notifies `rbs_auth` (sent by Postgres at the commit, to every
-- node), and each node clears what it holds. `last_used_at`, written in batches, notifies nothing.
CREATE FUNCTION rbs_auth_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('rbs_auth', '');
  RETURN NULL;
END
$$;

CREATE TRIGGER api_keys_auth_changed
  AFTER UPDATE OF account_id, created_by, secret_hash, revoked_at, service_account_id, scopes, mode OR DELETE
  ON api_keys FOR EACH STATEMENT EXECUTE FUNCTION rbs_auth_changed();

CREATE TRIGGER service_accounts_auth_changed
  AFTER UPDATE OR DELETE ON service_accounts FOR EACH STATEMENT EXECUTE FUNCTION rbs_auth_changed();

CREATE TRIGGER account_members_auth_changed
  AFTER UPDATE OR DELETE ON account_members FOR EACH STATEMENT EXECUTE FUNCTION rbs_auth_changed();
