-- A caller's labels on a session (string keys and values), to find it by the job or user it serves.
ALTER TABLE sessions ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}'::jsonb;
CREATE INDEX sessions_metadata ON sessions USING gin (metadata jsonb_path_ops);
