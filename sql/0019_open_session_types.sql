-- Which session types there are is the registered kinds' (browser, sandbox, or one a host composes
-- the service with), checked where a type is taken: the tables no longer list them.
ALTER TABLE sessions DROP CONSTRAINT IF EXISTS sessions_session_type_check;

ALTER TABLE workspaces DROP CONSTRAINT IF EXISTS workspaces_session_type_check
