// Every relative link of the documentation resolves: its file is in the
// checkout, and its `#anchor` is a heading of that file (GitHub's slugs).
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"

/** The pages: the README, docs/, the benches' page and the project's own documents. */
const pages = () => {
  const found = ["README.md", "CONTRIBUTING.md", "SECURITY.md", "CHANGELOG.md", "bench/README.md"]
  const walk = (dir: string) => {
    for (const entry of Fs.readdirSync(dir, { withFileTypes: true })) {
      const path = Path.join(dir, entry.name)
      if (entry.isDirectory()) walk(path)
      else if (entry.name.endsWith(".md")) found.push(path)
    }
  }
  walk("docs")
  return found
}

/** The page without its fenced code blocks. */
const unfenced = (markdown: string) => markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, "")

/** Text outside fenced code blocks and inline code, where a link means a link. */
export const prose = (markdown: string) => unfenced(markdown).replace(/`[^`\n]*`/g, "")

/** GitHub's anchor for a heading's text. */
export const slug = (heading: string) =>
  heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/`/g, "")
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
    .replace(/ /g, "-")

/** Every anchor of a page: its headings' slugs (a repeated one numbered as GitHub numbers it). */
export const anchors = (markdown: string) => {
  const seen = new Map<string, number>()
  const out = new Set<string>()
  for (const [, text] of unfenced(markdown).matchAll(/^#{1,6} +(.+?) *#*$/gm)) {
    const base = slug(text!)
    const count = seen.get(base) ?? 0
    seen.set(base, count + 1)
    out.add(count === 0 ? base : `${base}-${count}`)
  }
  return out
}

/** The relative links of a page: `[text](target)` and `[text]: target` definitions. */
export const links = (markdown: string) => {
  const text = prose(markdown)
  const targets = [
    ...[...text.matchAll(/\]\(([^)\s]+)(?: "[^"]*")?\)/g)].map(([, target]) => target!),
    ...[...text.matchAll(/^\[[^\]]+\]: +(\S+)/gm)].map(([, target]) => target!)
  ]
  return targets.filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target))
}

/** The links of `page` that resolve to no file, or to no heading of it. */
const broken = (page: string) => {
  const markdown = Fs.readFileSync(page, "utf8")
  return links(markdown).flatMap((link) => {
    const [file, anchor] = link.split("#") as [string, string | undefined]
    const target = file === "" ? page : Path.join(Path.dirname(page), decodeURIComponent(file))
    if (!Fs.existsSync(target)) return [`${page}: ${link} (no such file)`]
    if (anchor === undefined || anchor === "") return []
    if (!target.endsWith(".md")) return [`${page}: ${link} (an anchor into a file that is not a page)`]
    return anchors(Fs.readFileSync(target, "utf8")).has(anchor) ? [] : [`${page}: ${link} (no such heading)`]
  })
}

describe("the documentation's links", () => {
  it("reads anchors and links as GitHub does", () => {
    assert.strictEqual(
      slug("Quick start: a browser session in five minutes"),
      "quick-start-a-browser-session-in-five-minutes"
    )
    assert.strictEqual(slug("`POST /v1/sessions` and [its answer](x.md)"), "post-v1sessions-and-its-answer")
    assert.strictEqual(slug("Commands (`S`)"), "commands-s")
    assert.deepStrictEqual([...anchors("# A\n## A\n```\n# not a heading\n```\n")], ["a", "a-1"])
    assert.deepStrictEqual(links("[a](b.md#c) [d](https://e) `[f](g.md)`\n[h]: i.md\n"), ["b.md#c", "i.md"])
  })

  it("every relative link and anchor of the README, docs/, CONTRIBUTING.md and SECURITY.md resolves", () => {
    const all = pages()
    assert.includeMembers(all, ["docs/README.md", "docs/guides/browser-sessions.md"])
    for (const page of all) assert.isTrue(Fs.existsSync(page), `${page} is missing`)
    assert.deepStrictEqual(all.flatMap(broken), [])
  })

  it("every page of docs/ is reachable from docs/README.md", () => {
    const index = Fs.readFileSync("docs/README.md", "utf8")
    const listed = new Set(links(index).map((link) => Path.join("docs", link.split("#")[0]!)))
    const unlisted = pages().filter(
      (page) => page.startsWith("docs/") && page !== "docs/README.md" && !listed.has(page)
    )
    assert.deepStrictEqual(unlisted, [])
  })
})
