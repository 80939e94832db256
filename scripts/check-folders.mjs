// No import cycle between folders two levels deep (`features/sessions`,
// `platform/db`, ...): dependency-cruiser forbids cycles between files, and a
// cycle between folders is the same design error one size up. Reads the
// relative imports of src/ and fails `npm test` on any strongly connected set
// of folders. Plain Node, no dependencies.
import { readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, normalize, relative } from "node:path"

const folderOf = (file) => {
  const parts = relative("src", file).split("/")
  return parts.length > 2 ? parts.slice(0, 2).join("/") : parts[0]
}

const edges = new Map()
const walk = (dir) => {
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry)
    if (statSync(path).isDirectory()) walk(path)
    else if (path.endsWith(".ts")) {
      for (const match of readFileSync(path, "utf8").matchAll(
        /(?:from|import)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g
      )) {
        const from = folderOf(path)
        const to = folderOf(normalize(join(dirname(path), match[1])))
        if (from === to) continue
        if (!edges.has(from)) edges.set(from, new Set())
        edges.get(from).add(to)
      }
    }
  }
}
walk("src")

// Tarjan's strongly connected components.
let next = 0
const index = new Map()
const low = new Map()
const stack = []
const onStack = new Set()
const cycles = []
const visit = (v) => {
  index.set(v, next)
  low.set(v, next++)
  stack.push(v)
  onStack.add(v)
  for (const w of edges.get(v) ?? []) {
    if (!index.has(w)) {
      visit(w)
      low.set(v, Math.min(low.get(v), low.get(w)))
    } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)))
  }
  if (low.get(v) === index.get(v)) {
    const component = []
    let w
    do {
      w = stack.pop()
      onStack.delete(w)
      component.push(w)
    } while (w !== v)
    if (component.length > 1) cycles.push(component.sort())
  }
}
for (const folder of edges.keys()) if (!index.has(folder)) visit(folder)

for (const cycle of cycles) {
  console.error(`folders that import each other: ${cycle.join(", ")}`)
  for (const from of cycle)
    console.error(`  ${from} -> ${[...edges.get(from)].filter((to) => cycle.includes(to)).join(", ")}`)
}
if (cycles.length > 0) process.exit(1)
console.log(`folders: no import cycle between the ${edges.size} folders of src/`)
