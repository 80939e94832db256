-- A sandbox's CPUs, memory, disk and processes (resources at create, or the node's defaults then); null for a browser.
ALTER TABLE sessions ADD COLUMN resources jsonb;
