-- Placement: each node's heartbeat carries its browser capacity (MAX_BROWSERS)
-- and the session shards its runner holds. A new session goes to a node with
-- room, with an id whose shard that node holds; a stopping node sets its
-- capacity to 0. Live CDP connections are flushed with the egress figures, so
-- any node can show a session's `active_connection_leases`.
ALTER TABLE nodes ADD COLUMN capacity integer NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN shards integer[] NOT NULL DEFAULT '{}';
ALTER TABLE sessions ADD COLUMN active_connection_leases integer NOT NULL DEFAULT 0;
