-- A caller's own upstream proxy: its server and bypass list, and its credentials sealed (never shown).
ALTER TABLE sessions ADD COLUMN proxy jsonb;
