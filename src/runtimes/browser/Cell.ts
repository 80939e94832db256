import { Effect, Schema, type Scope } from "effect"
import * as ChildProcess from "node:child_process"
import * as Net from "node:net"
import * as Path from "node:path"
import * as Url from "node:url"

/**
 * The service's side of a browser's cell (`native/cell.c`): the command that
 * starts a browser in one, and the cell's control socket. A cell is a
 * network namespace whose only reachable addresses are the loopback ports it
 * forwards to its egress proxies' sockets, a mount view that shows the
 * browser Chromium's files, its profile and a private /tmp, and a PID
 * namespace of its own. docs/internals/browser-cell.md tells the whole of it.
 */

/** The cell's helper, from src/ and from a build in dist/ alike. */
export const CELL_EXEC = Url.fileURLToPath(new URL("../../../native/build/rbs-cell", import.meta.url))

/** Chromium's DevTools port inside its cell (no other network sees it). */
/**
 * Why no cell can be made on this machine, as the cell's `--probe` found (its namespaces, its own
 * /proc and /sys), or `undefined` when one can; `inContainer` names the container's option as the
 * remedy. Asked once, at start.
 */
export const refusal = (inContainer: boolean): string | undefined => {
  const probed = ChildProcess.spawnSync(CELL_EXEC, ["--probe"], { encoding: "utf8", timeout: 10_000 })
  if (probed.status === 0) return undefined
  const why = (probed.stderr || probed.error?.message || `exit ${probed.status}`)
    .trim()
    .replace(/^rbs-cell: /, "")
  return inContainer
    ? `${why}: a container masks /proc and /sys, so run it with --security-opt systempaths=unconfined (Docker and Podman; see the container guide)`
    : why
}

export const DEVTOOLS_PORT = 9222
/** The browser's own egress proxy, on its cell's loopback. */
export const PROXY_PORT = 3128

export class CellError extends Schema.TaggedError<CellError>()("CellError", {
  message: Schema.String,
  cause: Schema.optional(Schema.Defect())
}) {}

/** What the browser in a cell sees of the host's files, in the order the cell makes it. */
export type View = ReadonlyArray<
  | { readonly _tag: "ReadOnly"; readonly path: string }
  | { readonly _tag: "Writable"; readonly path: string }
  /** An empty dir none can read over `path`, when `path` is in the view. */
  | { readonly _tag: "Hidden"; readonly path: string }
>

/** One cell's launch: who the browser runs as, its limits and its view. */
export interface CellSpec {
  /** The cell's dir on the host (made for it, the service's alone): its sockets, its view's mount point. */
  readonly dir: string
  /** The browser's uid (and gid) when the service is root; `null`: the service's own, in a user namespace. */
  readonly uid: number | null
  readonly openFiles: number
  /** `RLIMIT_DATA` where no cgroup limits memory (0: none). */
  readonly dataBytes: number
  /** The most its private /tmp (a tmpfs, which Chromium's shared memory is made in) holds. */
  readonly tmpBytes: number
  readonly niceness: number
  /** The cgroup.procs files the cell joins before anything of it runs. */
  readonly cgroupProcs: ReadonlyArray<string>
  readonly view: View
  /** `show` binds a dir of this one into the view, at the same path (a session's downloads). */
  readonly downloadsDir: string
}

/**
 * One browser's confinement, for one launch: its cell, its user
 * and limits; its scope undoes all of it.
 */
export interface Jail {
  /** The browser's own user, or `null` for the service's (in a user namespace of its own). */
  readonly uid: number | null
  /** Its profile dir, created for it and readable by it alone. */
  readonly profileDir: string
  /** Its cell's dir on the host: the sockets its DevTools and its egress are reached through. */
  readonly cellDir: string
  /** The command that starts `file args` inside the cell. */
  readonly command: (file: string, args: ReadonlyArray<string>) => { file: string; args: Array<string> }
  /** The browser's whole environment: nothing of the service's (no secrets), its home in its profile. */
  readonly env: Record<string, string>
}

/** The socket of `dir`'s cell that leads to the cell's loopback `port` (its proxy listens there). */
export const egressSocket = (dir: string, port: number) => Path.join(dir, `egress-${port}.sock`)

/** The socket of `dir`'s cell that leads to Chromium's DevTools inside it. */
export const devtoolsSocket = (dir: string) => Path.join(dir, "devtools.sock")

/** The view's mount point in the cell's dir (an empty dir on the host). */
export const rootOf = (dir: string) => Path.join(dir, "root")

/** `file args` started in the cell `spec` describes. */
export const command = (spec: CellSpec, file: string, args: ReadonlyArray<string>) => {
  const options = [
    ...(spec.uid === null ? [] : ["--uid", String(spec.uid)]),
    "--nofile",
    String(spec.openFiles),
    "--data",
    String(spec.dataBytes),
    "--tmp-size",
    String(spec.tmpBytes),
    "--nice",
    String(spec.niceness),
    ...spec.cgroupProcs.flatMap((procs) => ["--cgroup", procs]),
    "--cell",
    spec.dir,
    "--devtools",
    String(DEVTOOLS_PORT),
    "--forward",
    String(PROXY_PORT),
    ...spec.view.flatMap((entry) => {
      switch (entry._tag) {
        case "ReadOnly":
          return ["--ro", entry.path]
        case "Writable":
          return ["--rw", entry.path]
        case "Hidden":
          return ["--hide", entry.path]
      }
    }),
    "--downloads",
    spec.downloadsDir
  ]
  return { file: CELL_EXEC, args: [...options, "--", file, ...args] }
}

/**
 * The DevTools endpoint a launch printed (`ws://127.0.0.1:9222/devtools/browser/<id>`, inside
 * the cell) as the host reaches it: through the cell's DevTools socket.
 */
export const hostEndpoint = (dir: string, printed: string) => {
  const path = new URL(printed).pathname
  return `ws+unix:${devtoolsSocket(dir)}:${path}`
}

/** A live cell's control socket. */
export interface CellControl {
  /** Its loopback `port` leads to `egressSocket(dir, port)` from now on (a browser context's proxy). */
  readonly forward: (port: number) => Effect.Effect<void, CellError>
  /** `downloadsDir/name` (a dir) appears in the browser's view at the same path. */
  readonly show: (name: string) => Effect.Effect<void, CellError>
}

/** The cell's answers arrive within this (it answers at once; a cell that does not is gone). */
const ANSWER_TIMEOUT_MS = 5_000

/** Connects to the control socket of `dir`'s cell, for the caller's scope. */
export const control = (dir: string): Effect.Effect<CellControl, CellError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.callback<Net.Socket, CellError>((resume) => {
      const socket = Net.connect(Path.join(dir, "control.sock"))
      socket.once("connect", () => {
        socket.removeAllListeners("error")
        // Later errors end the connection, and every waiting request with it (`close` below).
        socket.on("error", () => undefined)
        resume(Effect.succeed(socket))
      })
      socket.once("error", (cause) =>
        resume(Effect.fail(new CellError({ message: "cannot reach the browser's cell", cause })))
      )
      return Effect.sync(() => socket.destroy())
    }),
    (socket) => Effect.sync(() => socket.destroy())
  ).pipe(
    Effect.map((socket) => {
      // Answers come in the order asked, a line each.
      const waiting: Array<(answer: string | undefined) => void> = []
      let buffered = ""
      socket.setEncoding("utf8")
      socket.on("data", (chunk: string) => {
        buffered += chunk
        let end: number
        while ((end = buffered.indexOf("\n")) >= 0) {
          const line = buffered.slice(0, end)
          buffered = buffered.slice(end + 1)
          waiting.shift()?.(line)
        }
      })
      socket.once("close", () => {
        for (const waiter of waiting.splice(0)) waiter(undefined)
      })
      const ask = (request: string) =>
        Effect.callback<void, CellError>((resume) => {
          if (socket.destroyed)
            return resume(Effect.fail(new CellError({ message: "the browser's cell is gone" })))
          waiting.push((answer) =>
            resume(
              answer === "ok"
                ? Effect.void
                : Effect.fail(
                    new CellError({
                      message:
                        answer === undefined ? "the browser's cell is gone" : answer.replace(/^error /, "")
                    })
                  )
            )
          )
          socket.write(`${request}\n`)
        }).pipe(
          Effect.timeoutOrElse({
            duration: ANSWER_TIMEOUT_MS,
            // Its answer may still come, and would be taken for the next request's: the connection goes.
            orElse: () =>
              Effect.sync(() => socket.destroy()).pipe(
                Effect.andThen(
                  Effect.fail(new CellError({ message: `the browser's cell did not answer ${request}` }))
                )
              )
          })
        )
      return {
        forward: (port: number) => ask(`forward ${port}`),
        show: (name: string) =>
          /^[A-Za-z0-9_-]{1,128}$/.test(name)
            ? ask(`show ${name}`)
            : Effect.fail(new CellError({ message: `${JSON.stringify(name)} is not a name a cell shows` }))
      } satisfies CellControl
    })
  )
