import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"

/** The variable names in the first column of the configuration table (docs/operations/configuration.md). */
const documented = () => {
  const page = Fs.readFileSync("docs/operations/configuration.md", "utf8")
  const start = page.indexOf("| Name ")
  const table = page.slice(start, page.indexOf("\n\n", start))
  const names = new Set<string>()
  for (const row of table.split("\n").slice(2)) {
    const first = row.split("|")[1] ?? ""
    for (const [, name] of first.matchAll(/`([A-Z][A-Z0-9_<>]*)`/g)) names.add(name!)
  }
  return names
}

/** The variables the service reads (`platform/config/ConfigEnv.ts`), and the login providers' pattern. */
const read = () => {
  const source = Fs.readFileSync("src/platform/config/ConfigEnv.ts", "utf8")
  const names = new Set([...source.matchAll(/"([A-Z][A-Z0-9_]+)"/g)].map(([, name]) => name!))
  for (const suffix of ["ISSUER", "CLIENT_ID", "CLIENT_SECRET"]) names.add(`OIDC_<NAME>_${suffix}`)
  return names
}

describe("the configuration table of the docs", () => {
  it("names every variable the service reads, and none it does not", () => {
    const table = documented()
    const code = read()
    assert.deepStrictEqual(
      [...code].filter((name) => !table.has(name)).sort(),
      [],
      "read by the service, missing from the table"
    )
    assert.deepStrictEqual(
      [...table].filter((name) => !code.has(name)).sort(),
      [],
      "in the table, read by nothing"
    )
  })
})
