import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as FsSync from "node:fs"
import * as Cgroups from "../../src/runtimes/browser/Cgroups.ts"
import { findProcessesUsing } from "../../src/runtimes/browser/Chromium.ts"
import { cellPlace, profilesPlace } from "../../src/runtimes/browser/ProfilesPlace.ts"
import { isReady, request, signUp, waitForSession } from "../support/Client.ts"
import { until } from "../support/Poll.ts"
import * as Sandboxes from "../support/Sandboxes.ts"
import { rbs, startService } from "../support/ServiceProcess.ts"
import * as TestService from "../support/TestService.ts"

/** The process group of each pid in /proc. */
const processGroups = () => {
  const groups = new Map<number, number>()
  for (const entry of FsSync.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const text = FsSync.readFileSync(`/proc/${entry}/stat`, "utf8")
      const fields = text.slice(text.lastIndexOf(")") + 2).split(" ")
      if (fields[0] !== "Z") groups.set(Number(entry), Number(fields[2]))
    } catch {
      // gone meanwhile
    }
  }
  return groups
}

/** The process groups of `pids`. */
const groupsOf = (pids: ReadonlyArray<number>) => {
  const groups = processGroups()
  return new Set(pids.flatMap((pid) => (groups.has(pid) ? [groups.get(pid)!] : [])))
}

/** Every live process of `groups`: a browser's renderers, zygotes and GPU process with it. */
const membersOf = (groups: ReadonlySet<number>) =>
  [...processGroups()].filter(([, group]) => groups.has(group)).map(([pid]) => pid)

const asRoot = process.getuid?.() === 0

describe("a service that dies", () => {
  it.live(
    "killed with SIGKILL, its process group takes every browser and sandbox it started with it within 10 s, before any restart; rbs cleanup removes what they left and its browsers' cgroups",
    () =>
      Effect.gen(function* () {
        const dataDir = yield* TestService.freshDataDir
        const profilesDir = TestService.profilesDirOf(dataDir)
        const env = {
          DATA_DIR: dataDir,
          DATABASE_URL: yield* TestService.freshDatabase,
          PORT: String(yield* TestService.freePort),
          BROWSER_POOL_SIZE: "1",
          SANDBOX_POOL_SIZE: "0",
          SIGNUP_CREDIT_USD: "5"
        }
        const host = Sandboxes.hostOf(dataDir)
        const service = yield* startService(env, undefined, { detached: true })
        const account = yield* signUp(service.baseUrl)
        const kinds = asRoot ? [{}, { session_type: "sandbox" }] : [{}]
        for (const body of kinds) {
          const created = yield* request(service.baseUrl, "POST", "/v1/sessions", { key: account.key, body })
          assert.strictEqual(created.status, 201, JSON.stringify(created.json))
          yield* waitForSession(service.baseUrl, account.key, created.json.id, isReady)
        }
        const browsers = yield* Effect.promise(() => findProcessesUsing(profilesDir))
        const groups = groupsOf(browsers)
        assert.strictEqual(groups.size, 2, "the session's browser and the warm one, each a group of its own")
        assert.isAtLeast(membersOf(groups).length, browsers.length)
        const containers = yield* Sandboxes.containers(host)
        if (asRoot) assert.isAtLeast(containers.length, 1, "the sandbox session's")

        // Refused while the service runs: it would remove a live service's sandboxes.
        const refused = yield* rbs(["cleanup"], env)
        assert.strictEqual(refused.code, 1)
        assert.include(refused.stderr, `a service (pid ${service.child.pid}) is running from ${dataDir}`)

        // The browsers' cgroups it made (one dir a hierarchy), which nothing of it removes once it is killed.
        const placed = profilesPlace(dataDir, undefined)
        if (typeof placed === "string") return assert.fail(placed)
        const cgroups = Cgroups.basesOf(placed.tag).filter((dir) => FsSync.existsSync(dir))
        if (asRoot) assert.isAtLeast(cgroups.length, 1, "the browsers' cgroups")

        process.kill(-service.child.pid!, "SIGKILL")
        const left = yield* until(
          Effect.sync(() => membersOf(groups)),
          (alive) => alive.length === 0,
          10_000
        )
        assert.deepStrictEqual(left, [], "no process of a browser it started lives on")

        // Each sandbox's supervisor sees the service's end of its lifeline close, and ends the sandbox.
        const runningAfter = yield* until(Sandboxes.running(host), (alive) => alive.length === 0, 10_000)
        assert.deepStrictEqual(runningAfter, [], "no sandbox it started runs on")
        // What they leave (runc's state, mounts, dirs) stays until the next start on the data dir, or
        // until an operator removes it.
        const stayed = yield* Sandboxes.containers(host)
        assert.includeMembers([...stayed], [...containers])
        const cleaned = yield* rbs(["cleanup"], env)
        assert.strictEqual(cleaned.code, 0, cleaned.stderr)
        assert.include(
          cleaned.stdout,
          asRoot
            ? `Removed 0 browser processes and ${stayed.length} sandbox container${stayed.length === 1 ? "" : "s"} left by a service of ${dataDir}.`
            : `Nothing was left running by a service of ${dataDir}.`
        )
        assert.deepStrictEqual(yield* Sandboxes.leftovers(host), {
          containers: [],
          mounts: [],
          cgroups: [],
          dirs: []
        })
        assert.deepStrictEqual(
          cgroups.filter((dir) => FsSync.existsSync(dir)),
          [],
          "rbs cleanup removes the browsers' cgroups"
        )
        // Its browsers' cells' dirs, and their profiles' parent in memory.
        const { base, prefix } = cellPlace(placed)
        assert.deepStrictEqual(
          FsSync.readdirSync(base).filter((name) => name.startsWith(prefix)),
          [],
          "rbs cleanup removes the cells' dirs"
        )
        if (placed.inMemory) assert.isFalse(FsSync.existsSync(placed.profilesDir), "and the profiles' parent")
        const again = yield* rbs(["cleanup"], env)
        assert.include(again.stdout, `Nothing was left running by a service of ${dataDir}.`)
      }).pipe(Effect.scoped),
    120_000
  )
})
