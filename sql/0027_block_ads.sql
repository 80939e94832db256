-- The session's proxy refuses the hosts of the ad and tracker lists (never billed).
ALTER TABLE sessions ADD COLUMN block_ads boolean NOT NULL DEFAULT false;
