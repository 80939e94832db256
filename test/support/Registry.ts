import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { freePort, TEST_ROOT } from "./TestService.ts"

/** Debian's `docker-registry` (distribution 2.8), which the set-up installs for `npm test`. */
export const REGISTRY_BINARY = "/usr/bin/docker-registry"

export interface Registry {
  /** `127.0.0.1:<port>`: what a reference names it by. */
  readonly address: string
}

const run = (file: string, args: ReadonlyArray<string>) =>
  Effect.promise(
    () =>
      new Promise<string>((resolve, reject) =>
        ChildProcess.execFile(file, [...args], { maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) =>
          error === null
            ? resolve(stdout)
            : reject(new Error(`${file} ${args.join(" ")}: ${stderr || error.message}`))
        )
      )
  )

/**
 * A registry of its own on 127.0.0.1 (plain http, storage in a temp dir), for the scope:
 * with `htpasswd`, one that takes only that user (basic auth, bcrypt hashed by Apache's htpasswd).
 */
export const start = (
  options: { readonly user?: { readonly name: string; readonly password: string } } = {}
) =>
  Effect.gen(function* () {
    const dir = yield* Effect.acquireRelease(
      Effect.promise(async () => {
        await Fs.mkdir(Path.join(TEST_ROOT, "runs"), { recursive: true })
        return Fs.mkdtemp(Path.join(TEST_ROOT, "runs", "registry-"))
      }),
      (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
    )
    const port = yield* freePort
    if (options.user !== undefined)
      yield* run("htpasswd", ["-Bbc", Path.join(dir, "htpasswd"), options.user.name, options.user.password])
    const config = [
      "version: 0.1",
      "log:",
      "  level: error",
      "storage:",
      "  filesystem:",
      `    rootdirectory: ${Path.join(dir, "data")}`,
      "  delete:",
      "    enabled: true",
      "http:",
      `  addr: 127.0.0.1:${port}`,
      ...(options.user === undefined
        ? []
        : ["auth:", "  htpasswd:", "    realm: test", `    path: ${Path.join(dir, "htpasswd")}`])
    ].join("\n")
    yield* Effect.promise(() => Fs.writeFile(Path.join(dir, "config.yml"), config))
    yield* Effect.acquireRelease(
      Effect.sync(() =>
        ChildProcess.spawn(REGISTRY_BINARY, ["serve", Path.join(dir, "config.yml")], { stdio: "ignore" })
      ),
      (child) =>
        Effect.promise(
          () =>
            new Promise<void>((resolve) => {
              if (child.exitCode !== null || child.signalCode !== null) return resolve()
              child.once("exit", () => resolve())
              child.kill("SIGTERM")
            })
        )
    )
    const address = `127.0.0.1:${port}`
    // Up once /v2/ answers (401 for one with auth).
    for (let attempt = 0; ; attempt++) {
      const answered = yield* Effect.promise(() =>
        fetch(`http://${address}/v2/`).then(
          (response) => response.status,
          () => 0
        )
      )
      if (answered === 200 || answered === 401) break
      if (attempt > 200) return yield* Effect.die(new Error(`the registry on ${address} never answered`))
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 25)))
    }
    return { address } satisfies Registry
  })

/** Copies an image (any skopeo source) into `registry` as `repository:tag`. */
export const push = (
  registry: Registry,
  source: string,
  target: string,
  user?: { readonly name: string; readonly password: string }
) =>
  run("skopeo", [
    "--insecure-policy",
    "copy",
    "--quiet",
    "--dest-tls-verify=false",
    ...(user === undefined ? [] : ["--dest-creds", `${user.name}:${user.password}`]),
    source,
    `docker://${registry.address}/${target}`
  ])

/** Runs a program to its end (umoci, skopeo), failing with its stderr. */
export const tool = run
