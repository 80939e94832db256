// Every table has one owning module (docs/internals/architecture.md, "Layout"): SQL that names a
// table appears in its owner's folder alone. Scans the sql`...` templates of
// src/ for the tables the migrations create; a table named elsewhere, or one
// with no owner below, fails `npm test`. Plain Node, no dependencies.
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"

/** Each table's owner: the one folder whose code may name it in SQL. */
export const OWNERS = {
  "platform/cluster": ["nodes"],
  "features/identity": [
    "users",
    "user_identities",
    "web_sessions",
    "oidc_logins",
    "accounts",
    "account_members",
    "service_accounts",
    "api_keys",
    "ssh_keys"
  ],
  "features/audit": ["audit_events"],
  "features/idempotency": ["idempotency_keys"],
  "features/billing": ["ledger_entries", "checkouts", "billing_contacts", "account_balances"],
  "features/sessions": ["sessions"],
  "features/recordings": ["recordings"],
  "features/logs": ["session_logs", "session_log_events"],
  "features/extensions": ["extensions"],
  "features/images": ["images"],
  "features/webhooks": ["webhooks", "webhook_events", "webhook_deliveries", "webhook_attempts"],
  "features/jobs": ["jobs", "job_attempts"],
  "features/workspaces": ["workspaces", "workspace_snapshots"],
  "features/assistants": [
    "assistants",
    "assistant_channels",
    "assistant_config_intents",
    "assistant_credentials",
    "assistant_link_flows",
    "assistant_links",
    "assistant_usage_events"
  ]
}

const ownerOf = new Map(Object.entries(OWNERS).flatMap(([owner, tables]) => tables.map((t) => [t, owner])))

const created = new Set()
for (const file of readdirSync("sql"))
  for (const match of readFileSync(join("sql", file), "utf8").matchAll(
    /CREATE TABLE(?: IF NOT EXISTS)? ([a-z_]+)/gi
  ))
    created.add(match[1])
const unowned = [...created].filter((table) => !ownerOf.has(table))

const files = []
const walk = (dir) => {
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry)
    if (statSync(path).isDirectory()) walk(path)
    else if (path.endsWith(".ts")) files.push(path)
  }
}
walk("src")

/** `file: table` for each table a file names in SQL outside its owner's folder. */
const found = new Set()
for (const file of files) {
  const text = readFileSync(file, "utf8")
  for (const template of text.matchAll(/\bsql(?:<[^>`]*>)?`([^`]*)`/g)) {
    for (const [table, owner] of ownerOf) {
      if (file.startsWith(`src/${owner}/`)) continue
      if (new RegExp(`(?<![\\w.])${table}(?![\\w])`).test(template[1])) found.add(`${file}: ${table}`)
    }
  }
}

for (const table of unowned) console.error(`table ${table}: no owner in scripts/check-tables.mjs`)
for (const entry of [...found].sort())
  console.error(`${entry}: named outside its owner (${ownerOf.get(entry.split(": ")[1])})`)
if (unowned.length + found.size > 0) process.exit(1)
console.log(`tables: each named by its owner alone (${created.size} tables)`)
