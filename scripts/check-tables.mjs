// Every table has one owning module (README, "Layout"): SQL that names a
// table appears in its owner's folder alone. Scans the sql`...` templates of
// src/ for the tables the migrations create; a table named elsewhere that is
// not in the known list fails `npm test`. Plain Node, no dependencies.
//
//   node scripts/check-tables.mjs            check
//   node scripts/check-tables.mjs --update   rewrite the known list (it may only shrink)
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs"
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

const KNOWN = ".table-owners-known-violations.json"

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

const known = new Set(JSON.parse(readFileSync(KNOWN, "utf8")))
if (process.argv.includes("--update")) {
  writeFileSync(KNOWN, `${JSON.stringify([...found].sort(), null, 2)}\n`)
  console.log(`${found.size} known`)
  process.exit(0)
}
const fresh = [...found].filter((entry) => !known.has(entry)).sort()
const stale = [...known].filter((entry) => !found.has(entry)).sort()
for (const table of unowned) console.error(`table ${table}: no owner in scripts/check-tables.mjs`)
for (const entry of fresh)
  console.error(`${entry}: named outside its owner (${ownerOf.get(entry.split(": ")[1])})`)
for (const entry of stale) console.error(`${entry}: no longer there; remove it from ${KNOWN}`)
if (unowned.length + fresh.length + stale.length > 0) process.exit(1)
console.log(`tables: each named by its owner alone (${known.size} known exceptions)`)
