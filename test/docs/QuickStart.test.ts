// The README's quick starts, run as a newcomer runs them: each block marked
// `<!-- quickstart: NAME -->` is taken from the README as written (only the
// address `http://127.0.0.1:8080` becomes the test service's) and run by bash
// in a directory that stands for the checkout, against a fresh service. Every
// `#=> ...` line of a block is what the step before it prints: each must be
// found in the output, in order (`...` stands for anything on one line).
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { request, signUp } from "../support/Client.ts"
import { startService } from "../support/ServiceProcess.ts"
import * as TestService from "../support/TestService.ts"
import { NOBODY, reachableBy } from "../support/Users.ts"
import {
  bash,
  checkoutFor,
  expectations,
  quickStarts,
  README_ADDRESS,
  unmet
} from "../support/QuickStarts.ts"

/** A fresh service (as `user`), and the environment its operator's commands need. */
const freshService = (user: { readonly uid: number; readonly gid: number } | undefined) =>
  Effect.gen(function* () {
    const dataDir = yield* TestService.freshDataDir
    if (user !== undefined) Fs.chownSync(dataDir, user.uid, user.gid)
    // Not root: its own embedded Postgres in the data dir, as `npm start` makes one (the run's
    // server listens on a socket only root reaches).
    const env: Record<string, string> = {
      DATA_DIR: dataDir,
      ...(user === undefined ? { DATABASE_URL: yield* TestService.freshDatabase } : {}),
      PORT: String(yield* TestService.freePort),
      BROWSER_POOL_SIZE: "1"
    }
    const service = yield* startService(env, undefined, user === undefined ? {} : { user })
    return { env, baseUrl: service.baseUrl }
  })

const run = (
  blocks: ReadonlyArray<string>,
  user: { readonly uid: number; readonly gid: number } | undefined
) =>
  Effect.gen(function* () {
    const { env, baseUrl } = yield* freshService(user)
    const cwd = yield* checkoutFor(user)
    const script = blocks.join("\n").replaceAll(README_ADDRESS, baseUrl)
    const result = yield* bash(script, cwd, env, user)
    assert.strictEqual(result.code, 0, result.output)
    assert.deepStrictEqual(
      unmet(
        blocks.flatMap((block) => expectations(block, baseUrl)),
        result.output
      ),
      [],
      result.output
    )
    return { env, baseUrl, cwd }
  })

const readme = Fs.readFileSync("README.md", "utf8")
const blocks = quickStarts(readme)
const asRoot = process.getuid?.() === 0

describe("the README's quick starts", () => {
  it("has a browser, a container and a sandbox quick start, each with what it prints", () => {
    assert.deepStrictEqual([...blocks.keys()], ["browser", "container", "sandbox"])
    for (const block of blocks.values()) assert.isAtLeast(expectations(block, "").length, 3)
  })

  it("checks what a step prints line by line, in order", () => {
    const expected = expectations("echo\n#=> a ... c\n#=> 204\n", "")
    assert.deepStrictEqual(unmet(expected, "x\na b c\n204\n"), [])
    assert.deepStrictEqual(unmet(expected, "x\na b c204"), [])
    assert.deepStrictEqual(unmet(expected, "204\na b c\n"), ["204"])
    assert.deepStrictEqual(unmet(expected, "a b\nc\n204\n"), ["a ... c"])
  })

  it.live("`npx rbs` on the machine's own npm and Node prints what it was asked for, and no warning", () =>
    Effect.gen(function* () {
      const cwd = yield* checkoutFor(undefined)
      // The machine's npm and Node, as a newcomer's shell has them: not the checkout's Node 24.
      const path = process.env.PATH!.split(":").filter((dir) => !dir.includes("node_modules"))
      const result = yield* bash(
        "node --version && npx rbs --version",
        cwd,
        { PATH: path.join(":") },
        undefined
      )
      assert.strictEqual(result.code, 0, result.output)
      const version = JSON.parse(Fs.readFileSync("package.json", "utf8")).version
      assert.match(result.output, new RegExp(`^v\\d+\\.\\d+\\.\\d+\\nrbs v${version}\\n$`))
    }).pipe(Effect.scoped)
  )

  it.live(
    "the browser quick start works as written for a user who is not root, whose sandbox create is refused with why",
    () =>
      Effect.gen(function* () {
        // As nobody when the checkout is readable to it (else as this user: still the block as written).
        const user = asRoot && reachableBy(NOBODY) ? NOBODY : undefined
        const { baseUrl, env, cwd } = yield* run([blocks.get("browser")!], user)
        assert.isTrue(Fs.statSync(Path.join(cwd, "shot.png")).size > 1000, "the screenshot")
        if (user === undefined && asRoot) return
        // A node that is not root runs no sandboxes, and says so rather than "no capacity".
        const account = yield* signUp(baseUrl)
        const credited = yield* bash(
          `npx rbs billing credit --account ${account.email} --usd 1 --reason test`,
          cwd,
          env,
          user
        )
        assert.strictEqual(credited.code, 0, credited.output)
        const key = account.key
        const refused = yield* request(baseUrl, "POST", "/v1/sessions", {
          key,
          body: { session_type: "sandbox" }
        })
        assert.strictEqual(refused.status, 503, refused.text)
        assert.strictEqual(refused.json.error.code, "session_type_unavailable")
        assert.match(refused.json.error.message, /root/)
        assert.isNull(refused.headers.get("retry-after"))
      }).pipe(Effect.scoped),
    180_000
  )

  it.live(
    "the sandbox quick start works as written as root, after the browser one",
    () =>
      Effect.gen(function* () {
        // Sandboxes need root (the block says so first); elsewhere the test above checks the refusal.
        if (!asRoot) return
        yield* run([blocks.get("browser")!, blocks.get("sandbox")!], undefined)
      }).pipe(Effect.scoped),
    180_000
  )
})
