// Podman for the container tests: the README's `docker` words run by Podman, with no registry. The
// Dockerfile's base (`debian:bookworm-slim`) is made here from Debian's packages when it is not in
// Podman's store (mmdebstrap, as the sandbox images are); `--pull=never` everywhere.
import { Effect } from "effect"
import { spawn, spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"

export const BASE_IMAGE = "docker.io/library/debian:bookworm-slim"
/** The images the tests build, kept between runs (their layers are the build's cache). */
export const IMAGE = "localhost/rbs-test:latest"
export const POSTGRES_IMAGE = "localhost/rbs-test-postgres:latest"
export const SANDBOXES_IMAGE = "localhost/rbs-test-sandboxes:latest"

/** Why the container tests cannot run here, or `undefined` when they can. */
export const unavailable = (): string | undefined => {
  for (const tool of ["podman", "podman-compose"])
    if (spawnSync("sh", ["-c", `command -v ${tool}`]).status !== 0)
      return `${tool} is not installed (npm test installs Debian's podman, buildah and podman-compose as root)`
  if (process.getuid?.() !== 0) return "the container tests run Podman as root"
  return undefined
}

/**
 * A `containers.conf` for this machine: Podman gives a container the largest open-files and
 * process limits by default, which a root that cannot raise its own hard limits (this machine)
 * cannot set. The tests give containers this process's hard limits instead. On a host whose
 * cgroups are v1 or hybrid (`/sys/fs/cgroup` not a cgroup2 mount), crun refuses to make any
 * container ("cgroups in hybrid mode not supported"): runc, which the service needs anyway, runs them.
 */
export const containersConf = () => {
  const dir = Path.resolve(".test-data")
  Fs.mkdirSync(dir, { recursive: true })
  const hard = (flag: string) =>
    spawnSync("sh", ["-c", `ulimit -H${flag}`], { encoding: "utf8" }).stdout.trim()
  const files = hard("n")
  const processes = Math.min(Number(hard("u")) || 8192, 8192)
  const file = Path.join(dir, "containers.conf")
  Fs.writeFileSync(
    file,
    `[containers]\ndefault_ulimits = ["nofile=${files}:${files}", "nproc=${processes}:${processes}"]\n` +
      (cgroup2() ? "" : `[engine]\nruntime = "runc"\n`)
  )
  return file
}

/** Whether `/sys/fs/cgroup` is the unified (v2) hierarchy alone. */
const cgroup2 = () =>
  spawnSync("stat", ["-fc", "%T", "/sys/fs/cgroup"], { encoding: "utf8" }).stdout.trim() === "cgroup2fs"

export interface Ran {
  readonly code: number | null
  readonly output: string
  readonly seconds: number
}

/** A command with its output, in `env` added to this process's; it fails the test past `timeoutMs`. */
export const run = (
  command: string,
  args: ReadonlyArray<string>,
  env: Record<string, string> = {},
  timeoutMs = 20 * 60_000,
  cwd = process.cwd()
) =>
  Effect.promise(
    () =>
      new Promise<Ran>((resolve) => {
        const started = Date.now()
        const child = spawn(command, args, {
          env: { ...process.env, ...env },
          cwd,
          stdio: ["ignore", "pipe", "pipe"]
        })
        let output = ""
        child.stdout!.on("data", (chunk) => (output += chunk))
        child.stderr!.on("data", (chunk) => (output += chunk))
        const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs)
        child.once("exit", (code) => {
          clearTimeout(timer)
          resolve({ code, output, seconds: (Date.now() - started) / 1000 })
        })
      })
  )

/** The Dockerfile's base image in Podman's store: made from Debian's packages when it is not there. */
export const baseImage = (env: Record<string, string>) =>
  Effect.gen(function* () {
    if ((yield* run("podman", ["image", "exists", BASE_IMAGE], env)).code === 0) return undefined
    const made = yield* run(
      "sh",
      [
        "-c",
        `mmdebstrap --variant=minbase --quiet bookworm - http://deb.debian.org/debian | podman import - ${BASE_IMAGE}`
      ],
      env
    )
    if (made.code !== 0) return yield* Effect.die(new Error(`the base image: ${made.output}`))
    return made.seconds
  })

/**
 * `podman build` with no registry; behind a TLS-intercepting proxy (`NODE_EXTRA_CA_CERTS` names
 * its CA), the CA reaches the build as a secret, never a layer.
 */
export const buildArgs = () => {
  const ca = process.env.NODE_EXTRA_CA_CERTS
  return [
    "build",
    "--pull=never",
    "--format",
    "docker",
    ...(ca !== undefined && Fs.existsSync(ca) ? ["--secret", `id=ca,src=${ca}`] : [])
  ]
}
