// The reference pages kept true to the code they describe: every error code the served OpenAPI
// document declares (docs/openapi.json) and every error class of src is a row of
// docs/reference/errors.md with its status; every metric src defines is named in
// docs/operations/observability.md; every webhook event type has a section in
// docs/reference/webhook-events.md that names each field of its `data`.
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { WEBHOOK_EVENT_DATA, WEBHOOK_EVENTS } from "../../src/kernel/Webhook.ts"

const read = (path: string) => Fs.readFileSync(path, "utf8")

/** The `.ts` files under `dir`. */
const sources = (dir: string): ReadonlyArray<string> =>
  Fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = Path.join(dir, entry.name)
    return entry.isDirectory() ? sources(path) : entry.name.endsWith(".ts") ? [path] : []
  })

/** A source file without its comment lines (`//`, and the lines of a `/* ... *\/` block). */
const withoutComments = (text: string) =>
  text
    .split("\n")
    .filter((line) => !/^\s*(\/\/|\/\*|\*)/.test(line))
    .join("\n")

/** The rows `| \`code\` | status | meaning |` of the errors page: each code's status cell. */
const errorRows = (page: string) => {
  const rows = new Map<string, string>()
  for (const line of page.split("\n")) {
    const cells = line.split("|").map((cell) => cell.trim())
    const code = /^`([a-z][a-z0-9_]*)`$/.exec(cells[1] ?? "")?.[1]
    if (code !== undefined && /^\d{3}\b/.test(cells[2] ?? "")) rows.set(code, cells[2]!)
  }
  return rows
}

/**
 * The error codes an OpenAPI document declares, each with the statuses it is answered with: the
 * `code` literals (`enum` or `const`) of every `{ error: { code, message } }` body, found through
 * `$ref`s, in each response of each operation; and those of `components` (with no status).
 */
const declaredCodes = (document: any) => {
  const pointer = (ref: string): unknown =>
    ref
      .slice(2)
      .split("/")
      .reduce((at: any, key) => at?.[key.replaceAll("~1", "/").replaceAll("~0", "~")], document)
  const resolve = (node: any, depth = 0): any =>
    node !== null && typeof node === "object" && typeof node.$ref === "string" && depth < 32
      ? resolve(pointer(node.$ref), depth + 1)
      : node
  const found = new Map<string, Set<string>>()
  const add = (code: unknown, status: string | undefined) => {
    if (typeof code !== "string") return
    const statuses = found.get(code) ?? new Set<string>()
    if (status !== undefined) statuses.add(status)
    found.set(code, statuses)
  }
  const walk = (node: any, status: string | undefined, seen: Set<unknown>) => {
    const at = resolve(node)
    if (at === null || typeof at !== "object" || seen.has(at)) return
    seen.add(at)
    const code = resolve(resolve(resolve(at.properties)?.error)?.properties?.code)
    if (code !== undefined && code !== null && typeof code === "object") {
      for (const value of Array.isArray(code.enum) ? code.enum : []) add(value, status)
      add(code.const, status)
    }
    for (const value of Object.values(at)) walk(value, status, seen)
  }
  for (const operations of Object.values<any>(document.paths ?? {}))
    for (const operation of Object.values<any>(operations ?? {}))
      for (const [status, response] of Object.entries<any>(operation?.responses ?? {}))
        walk(response, status, new Set())
  walk(document.components ?? {}, undefined, new Set())
  return found
}

/** The names given to `Metric.counter(...)` and its kin in `files`; a name that is not a literal is refused. */
const metricNames = (files: ReadonlyArray<string>) => {
  const names = new Set<string>()
  for (const file of files) {
    const text = withoutComments(read(file))
    for (const match of text.matchAll(
      /Metric\.(counter|gauge|histogram|summary|frequency|timer)\(\s*([^,)]*)/g
    )) {
      const literal = /^"([^"]+)"$/.exec(match[2]!.trim())
      assert.isDefined(literal, `${file}: a metric's name must be a string literal, not ${match[2]}`)
      names.add(literal![1]!)
    }
  }
  return names
}

/** The part of a page under the heading that names `` `text` ``, to the next heading of its level or above. */
const sectionNaming = (page: string, text: string) => {
  const lines = page.split("\n")
  const start = lines.findIndex((line) => /^#{2,6} /.test(line) && line.includes(`\`${text}\``))
  if (start < 0) return undefined
  const level = /^#+/.exec(lines[start]!)![0].length
  const end = lines.findIndex(
    (line, index) => index > start && /^#+ /.test(line) && /^#+/.exec(line)![0].length <= level
  )
  return lines.slice(start, end < 0 ? undefined : end).join("\n")
}

describe("docs/reference/errors.md", () => {
  const rows = errorRows(read("docs/reference/errors.md"))

  it("has a row, with its status, for every error code the OpenAPI document declares", () => {
    const declared = declaredCodes(JSON.parse(read("docs/openapi.json")))
    // The walk understands the document: a code every session route answers is there.
    assert.deepStrictEqual([...(declared.get("session_not_found") ?? [])], ["404"])
    for (const [code, statuses] of declared) {
      const row = rows.get(code)
      assert.isDefined(row, `errors.md has no row for \`${code}\``)
      for (const status of statuses)
        assert.include(
          row!.split(/\D+/),
          status,
          `errors.md gives \`${code}\` ${row}, the API answers ${status}`
        )
    }
  })

  it("has a row, with its status, for every error class of src", () => {
    let classes = 0
    for (const file of sources("src")) {
      const text = withoutComments(read(file))
      for (const match of text.matchAll(/readonly status = (\d{3})\s+readonly code = "([a-z0-9_]+)"/g)) {
        classes++
        const [, status, code] = match
        const row = rows.get(code!)
        assert.isDefined(row, `errors.md has no row for \`${code}\` (${file})`)
        assert.include(
          row!.split(/\D+/),
          status!,
          `errors.md gives \`${code}\` ${row}, ${file} says ${status}`
        )
      }
    }
    assert.isAbove(classes, 0)
  })
})

describe("docs/operations/observability.md", () => {
  it("names every metric src defines", () => {
    const page = read("docs/operations/observability.md")
    const names = metricNames(sources("src"))
    assert.include([...names], "rbs_liveview_viewers")
    for (const name of names) assert.include(page, `\`${name}\``, `observability.md does not name ${name}`)
  })
})

describe("docs/reference/webhook-events.md", () => {
  it("has a section for every event type, naming each field of its data", () => {
    const page = read("docs/reference/webhook-events.md")
    assert.isAbove(WEBHOOK_EVENTS.length, 0)
    for (const type of WEBHOOK_EVENTS) {
      const section = sectionNaming(page, type)
      assert.isDefined(section, `webhook-events.md has no heading naming \`${type}\``)
      for (const field of Object.keys(WEBHOOK_EVENT_DATA[type].fields))
        assert.include(
          section!,
          `\`${field}\``,
          `the section of \`${type}\` does not name its field ${field}`
        )
    }
  })
})
