import * as Fs from "node:fs/promises"
import { Effect } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import * as Cgroups from "../../src/runtimes/browser/Cgroups.ts"
import { findProcessesUsing, killGroup } from "../../src/runtimes/browser/Chromium.ts"
import { profilesPlace, removeCellLeftovers } from "../../src/runtimes/browser/ProfilesPlace.ts"
import * as SandboxHost from "../../src/runtimes/sandbox/SandboxHost.ts"
import { IMAGES_DIR } from "./Images.ts"
import * as Sandboxes from "./Sandboxes.ts"
import { profilesDirOf, TEST_SCRYPT_N } from "./TestService.ts"

/**
 * `node src/main/main.ts`, as `npm start` runs it (or another entry, such as
 * `bin/rbs.mjs serve`), killed by the scope if the test leaves it running;
 * `detached`: in a process group of its own, as a terminal or a service
 * manager would start it; `user`: as that uid and gid instead of this process's.
 */
export const startService = (
  env: Record<string, string>,
  entry: ReadonlyArray<string> = ["src/main/main.ts"],
  options: {
    readonly detached?: boolean
    readonly user?: { readonly uid: number; readonly gid: number }
  } = {}
) =>
  Effect.acquireRelease(
    Effect.gen(function* () {
      const child = spawn(process.execPath, [...entry], {
        // The image the set-up built, and no warm sandbox unless a test asks for one.
        env: {
          ...process.env,
          LOG_LEVEL: "warn",
          SANDBOX_IMAGES_DIR: IMAGES_DIR,
          SANDBOX_POOL_SIZE: "0",
          PASSWORD_SCRYPT_N: String(TEST_SCRYPT_N),
          // The tests sign their users up from loopback: one address, many users a minute.
          LIMIT_REGISTRATIONS_PER_IP: "100000",
          LIMIT_REGISTRATIONS_PER_MINUTE: "100000",
          ...env
        },
        stdio: ["ignore", "pipe", "pipe"],
        detached: options.detached ?? false,
        ...(options.user === undefined ? {} : { uid: options.user.uid, gid: options.user.gid })
      })
      let stderr = ""
      child.stderr!.on("data", (chunk) => (stderr += chunk))
      child.stdout!.on("data", (chunk) => (stderr += chunk))
      const baseUrl = `http://127.0.0.1:${env.PORT}`
      const deadline = Date.now() + 60_000
      while (true) {
        const ready = yield* Effect.promise(() =>
          // A request that lands while the service is still starting may wait: ask again rather than hang.
          fetch(`${baseUrl}/readyz`, { signal: AbortSignal.timeout(2000) }).then(
            (response) => response.status === 200,
            () => false
          )
        )
        if (ready) break
        if (child.exitCode !== null || Date.now() > deadline) {
          return yield* Effect.die(new Error(`service did not start: ${stderr}`))
        }
        yield* Effect.sleep("100 millis")
      }
      return { child, baseUrl }
    }),
    // Even when a test fails half-way: stop gracefully, and leave no Chromium of it behind.
    ({ child }) =>
      Effect.gen(function* () {
        if (child.exitCode === null && child.signalCode === null) {
          yield* stop(child, "SIGTERM").pipe(
            Effect.timeout("20 seconds"),
            Effect.catch(() => stop(child, "SIGKILL"))
          )
        }
        const left = yield* Effect.promise(() => findProcessesUsing(profilesDirOf(env.DATA_DIR!)))
        for (const pid of left) killGroup(pid)
        if (process.getuid?.() === 0) yield* Sandboxes.reap(env.DATA_DIR!)
        // What `rbs cleanup` removes after a service that died (SIGKILL, a crash): its browsers'
        // cgroups and cells' dirs, its sandboxes' parent cgroups and sockets dir. A clean stop left
        // none of them.
        yield* Effect.promise(async () => {
          const placed = profilesPlace(env.DATA_DIR!, undefined)
          if (typeof placed !== "string") {
            await Cgroups.removeLeftovers(placed.tag)
            await removeCellLeftovers(placed).catch(() => 0)
            // A killed service's fresh profiles (in /dev/shm, outside its data dir): nothing else reaps them.
            await Fs.rm(placed.profilesDir, { recursive: true, force: true, maxRetries: 3 })
          }
          if (process.getuid?.() === 0) await SandboxHost.removeHostDirs(SandboxHost.hostPaths(env.DATA_DIR!))
        })
      })
  )

export const stop = (child: ChildProcess, signal: NodeJS.Signals) =>
  Effect.promise(
    () =>
      new Promise<number | null>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve(child.exitCode)
        child.once("exit", (code) => resolve(code))
        child.kill(signal)
      })
  )

/** `node bin/rbs.mjs <args>` as an operator runs `npx rbs`: its exit code and output. */
export const rbs = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  Effect.promise(
    () =>
      new Promise<{ readonly code: number | null; readonly stdout: string; readonly stderr: string }>(
        (resolve) => {
          const child = spawn(process.execPath, ["bin/rbs.mjs", ...args], {
            env: { ...process.env, LOG_LEVEL: "warn", ...env },
            stdio: ["ignore", "pipe", "pipe"]
          })
          let stdout = ""
          let stderr = ""
          child.stdout!.on("data", (chunk) => (stdout += chunk))
          child.stderr!.on("data", (chunk) => (stderr += chunk))
          child.once("exit", (code) => resolve({ code, stdout, stderr }))
        }
      )
  )
