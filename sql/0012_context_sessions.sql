-- A browser session's isolation: a browser of its own ('browser'), or a
-- browser context in a browser the account's other context sessions share
-- ('context'). Placement counts a node's open context sessions against its
-- context capacity (MAX_CONTEXTS), carried by its heartbeat.
ALTER TABLE sessions ADD COLUMN isolation text NOT NULL DEFAULT 'browser'
  CHECK (isolation IN ('browser', 'context'));

ALTER TABLE nodes ADD COLUMN context_capacity integer NOT NULL DEFAULT 0;

DROP INDEX sessions_open_idx;

CREATE INDEX sessions_open_idx ON sessions (node_id, session_type, isolation) WHERE status IN ('creating', 'ready')
