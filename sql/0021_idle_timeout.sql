-- A session may end once nothing uses it for this long (no CDP client, viewer, PTY or command).
ALTER TABLE sessions ADD COLUMN idle_timeout_seconds integer;
