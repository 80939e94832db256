#!/bin/sh
# Initialises the cluster on first start (POSTGRES_PASSWORD for the `postgres` user, POSTGRES_DB
# made), then runs the server in the foreground, listening on every address with password auth.
set -eu
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
data=/var/lib/postgresql/data
if [ ! -s "$data/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
  "$bin/initdb" -D "$data" -U postgres --pwfile="$pwfile" --auth-local=peer --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  printf "listen_addresses = '*'\n" >> "$data/postgresql.conf"
  printf 'host all all 0.0.0.0/0 scram-sha-256\nhost all all ::/0 scram-sha-256\n' >> "$data/pg_hba.conf"
  if [ -n "${POSTGRES_DB:-}" ] && [ "$POSTGRES_DB" != postgres ]; then
    "$bin/postgres" --single -D "$data" postgres >/dev/null <<SQL
CREATE DATABASE "$POSTGRES_DB";
SQL
  fi
fi
exec "$bin/postgres" -D "$data"
