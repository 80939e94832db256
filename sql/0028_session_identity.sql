-- What a browser session's pages say of their browser: user_agent, locale, timezone, viewport at create.
ALTER TABLE sessions ADD COLUMN identity jsonb;
