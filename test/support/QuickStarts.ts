// The README's quick starts as a test runs them: each block marked `<!-- quickstart: NAME -->`,
// taken from the README as written (only the address `http://127.0.0.1:8080` becomes the service
// under test's), run by bash in a directory that stands for the checkout. Every `#=> ...` line of a
// block is what the step before it prints: each must be found in the output, in order (`...`
// stands for anything on one line).
import { Effect } from "effect"
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

export const README_ADDRESS = "http://127.0.0.1:8080"

/** The README's quick-start blocks, by name. */
export const quickStarts = (readme: string) => {
  const blocks = new Map<string, string>()
  for (const [, name, body] of readme.matchAll(/<!-- quickstart: ([a-z-]+) -->\s*```sh\n([\s\S]*?)```/g))
    blocks.set(name!, body!)
  return blocks
}

/** The `#=> ...` lines of a block, as patterns (`...`: anything on the line). */
export const expectations = (block: string, baseUrl: string) =>
  block
    .split("\n")
    .filter((line) => line.startsWith("#=> "))
    .map((line) => {
      const text = line
        .slice(4)
        .replaceAll(README_ADDRESS.replace("http", "ws"), baseUrl.replace("http", "ws"))
      const parts = text.split("...").map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
      return { text, pattern: new RegExp(parts.join(".*")) }
    })

/**
 * The expectations `output` does not meet, each searched for after the one
 * before it (a step may print no newline, so the next one's output follows on
 * the same line).
 */
export const unmet = (expected: ReturnType<typeof expectations>, output: string) => {
  let at = 0
  const missing: Array<string> = []
  for (const { pattern, text } of expected) {
    const found = new RegExp(pattern.source, "g")
    found.lastIndex = at
    const match = found.exec(output)
    if (match === null) missing.push(text)
    else at = match.index + match[0].length
  }
  return missing
}

const OWN = new Set(["package.json", "package-lock.json", "bin"])

/** A directory standing for the checkout: its entries linked, the files a block writes its own. */
export const checkoutFor = (owner: { readonly uid: number; readonly gid: number } | undefined) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "rbs-quickstart-"))
      for (const entry of Fs.readdirSync(".")) {
        if (entry === ".git" || entry.startsWith(".test-data") || entry === ".data") continue
        // What `npx rbs` installs into npm's cache (the package itself) is the user's own, as in
        // their checkout: npm makes its command executable there.
        if (OWN.has(entry)) Fs.cpSync(entry, Path.join(dir, entry), { recursive: true })
        else Fs.symlinkSync(Path.resolve(entry), Path.join(dir, entry))
      }
      Fs.mkdirSync(Path.join(dir, ".home"))
      if (owner !== undefined) {
        for (const entry of [".", ".home", ...OWN]) {
          Fs.lchownSync(Path.join(dir, entry), owner.uid, owner.gid)
          if (entry === "bin")
            for (const file of Fs.readdirSync(Path.join(dir, entry)))
              Fs.chownSync(Path.join(dir, entry, file), owner.uid, owner.gid)
        }
      }
      return dir
    }),
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  )

/** `bash` running `script` in `cwd`, as `user`: its exit code and output. */
export const bash = (
  script: string,
  cwd: string,
  env: Record<string, string>,
  user: { readonly uid: number; readonly gid: number } | undefined
) =>
  Effect.promise(
    () =>
      new Promise<{ readonly code: number | null; readonly output: string }>((resolve) => {
        const child = spawn("bash", ["-e", "-o", "pipefail", "-c", script], {
          cwd,
          // The checkout's Node first, as `npm start` leaves it for `npx` and `npm exec`.
          env: {
            ...process.env,
            PATH: `${Path.resolve("node_modules/.bin")}:${process.env.PATH}`,
            HOME: Path.join(cwd, ".home"),
            // npm's own cache, not the one of the npm that started the tests (another user's).
            npm_config_cache: Path.join(cwd, ".home", ".npm"),
            npm_config_update_notifier: "false",
            LOG_LEVEL: "warn",
            ...env
          },
          stdio: ["ignore", "pipe", "pipe"],
          ...(user === undefined ? {} : { uid: user.uid, gid: user.gid })
        })
        let output = ""
        child.stdout!.on("data", (chunk) => (output += chunk))
        child.stderr!.on("data", (chunk) => (output += chunk))
        child.once("exit", (code) => resolve({ code, output }))
      })
  )
