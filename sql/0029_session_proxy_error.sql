-- The last failure of a session's own upstream proxy (reason, status, at, failures), shown on it.
ALTER TABLE sessions ADD COLUMN proxy_error jsonb;
