import { type ChildProcess, spawn } from "node:child_process"
import * as FsSync from "node:fs"
import type * as Net from "node:net"
import * as Os from "node:os"
import * as Url from "node:url"

/** The resident launcher (`native/spawner.c`, built by the set-up), from src/ and from a build in dist/ alike. */
export const SPAWNER = Url.fileURLToPath(new URL("../../../native/build/rbs-spawner", import.meta.url))

/** A program started in a process group of its own, its stderr read for Chromium's DevTools line. */
export interface Spawned {
  readonly pid: number
  /** The `ws://` endpoint its stderr names; rejects when it ends (or closes stderr) first, or after `timeoutMs`. */
  readonly endpoint: Promise<string>
  /** Settles once it is gone. */
  readonly exited: Promise<void>
  readonly hasExited: () => boolean
}

interface Running {
  readonly pid: number
  readonly endpoint: PromiseWithResolvers<string>
  readonly exited: PromiseWithResolvers<void>
  gone: boolean
}

const endedEarly = (output: string) => new Error(`Chromium exited before DevTools was ready: ${output}`)

/**
 * Kills a started program's process group. It leads one from its start (the
 * spawner's `setsid`, Node's `detached`), and the group's id is not reused
 * while any of it lives: so never the bare pid, which may be another
 * process's once the program is reaped.
 */
export const killStarted = (pid: number) => {
  try {
    process.kill(-pid, "SIGKILL")
  } catch {
    // the group is gone
  }
}

/** A process found by its command line (it may not lead a group): its group, else itself. */
export const killGroup = (pid: number) => {
  try {
    process.kill(-pid, "SIGKILL")
  } catch {
    try {
      process.kill(pid, "SIGKILL")
    } catch {
      // already gone
    }
  }
}

/**
 * The service's link to its `rbs-spawner`: requests down its stdin, events
 * (spawned, failed, endpoint, ended, exit) up its stdout, a line each. Its
 * children are the spawner's: should the spawner itself die, they are killed
 * (by the kernel, and here) and told gone, since nothing would tell their
 * exit any more. Should this process die, by any signal, the spawner kills
 * them all and exits.
 */
class Link {
  private readonly process: ChildProcess
  /** Starts asked for; `abandoned` once their caller gave up waiting (the program is then killed at once). */
  private readonly waiting = new Map<string, PromiseWithResolvers<Running> & { abandoned: boolean }>()
  private readonly running = new Map<number, Running>()
  private nextId = 1
  private buffered = ""
  dead = false

  constructor(file: string) {
    // A group of its own, as the browsers had: a Ctrl-C to the service's terminal group must not end it
    // (and with it every browser) before the service's own shutdown has ended the sessions.
    // It kills every program it started once this process is gone (its stdin closed, or its parent dead).
    this.process = spawn(file, [String(process.pid)], { detached: true, stdio: ["pipe", "pipe", "inherit"] })
    // The spawner keeps the service alive only while something of it is under way (see `hold`); it
    // exits when its stdin closes.
    this.process.unref()
    this.pipes().stdin.unref()
    this.hold()
    this.process.stdout!.setEncoding("utf8")
    this.process.stdout!.on("data", (chunk: string) => this.read(chunk))
    this.process.stdin!.on("error", () => this.lost())
    // `close`, not `exit`: the last of its stdout is read first.
    this.process.once("close", () => this.lost())
    this.process.once("error", () => this.lost())
  }

  private pipes() {
    return { stdin: this.process.stdin as Net.Socket, stdout: this.process.stdout as Net.Socket }
  }

  /** Its answers keep the event loop alive while a start or a program's exit is awaited, as a child would. */
  private hold() {
    if (this.waiting.size + this.running.size > 0) this.pipes().stdout.ref()
    else this.pipes().stdout.unref()
  }

  /** Gives up on a start: if it comes, its program is killed. */
  abandon(id: string) {
    const started = this.waiting.get(id)
    if (started !== undefined) started.abandoned = true
  }

  /** Resolves with the program's watch: its events may all have come in with its `spawned` line. */
  start(
    file: string,
    args: ReadonlyArray<string>,
    env: NodeJS.ProcessEnv
  ): { readonly id: string; readonly started: Promise<Running> } {
    const vars = Object.entries(env).flatMap(([name, value]) =>
      value === undefined ? [] : [`${name}=${value}`]
    )
    const fields = [file, String(args.length + 1), file, ...args, String(vars.length), ...vars]
    // As Node's spawn does: a NUL would shift every field after it.
    if (fields.some((field) => field.includes("\0"))) throw new Error("an argument or variable holds a NUL")
    if (this.dead) throw new Error("the spawner is gone")
    const id = String(this.nextId++)
    const body = Buffer.from([id, ...fields].map((field) => `${field}\0`).join(""))
    if (body.length > MAX_REQUEST) throw new Error("its arguments and environment are too large")
    const header = Buffer.alloc(4)
    header.writeUInt32LE(body.length)
    const started = Object.assign(Promise.withResolvers<Running>(), { abandoned: false })
    this.waiting.set(id, started)
    this.hold()
    this.process.stdin!.write(Buffer.concat([header, body]))
    return { id, started: started.promise }
  }

  private read(chunk: string) {
    this.buffered += chunk
    let end: number
    while ((end = this.buffered.indexOf("\n")) >= 0) {
      const line = this.buffered.slice(0, end)
      this.buffered = this.buffered.slice(end + 1)
      this.event(line)
    }
  }

  private event(line: string) {
    const [event, first, ...rest] = line.split(" ")
    const text = rest.join(" ")
    if (event === "spawned" || event === "failed") {
      const started = this.waiting.get(first!)
      this.waiting.delete(first!)
      if (event === "failed") {
        const code = Number(text)
        const name = Object.entries(Os.constants.errno).find(([, value]) => value === code)?.[0]
        started?.reject(new Error(`cannot start it: ${name ?? `errno ${code}`}`))
        return this.hold()
      }
      const running: Running = {
        pid: Number(text),
        endpoint: Promise.withResolvers<string>(),
        exited: Promise.withResolvers<void>(),
        gone: false
      }
      running.endpoint.promise.catch(() => undefined)
      this.running.set(running.pid, running)
      if (started === undefined || started.abandoned) killStarted(running.pid)
      else started.resolve(running)
      return this.hold()
    }
    const running = this.running.get(Number(first))
    if (running === undefined) return
    if (event === "endpoint") running.endpoint.resolve(text)
    else if (event === "ended") running.endpoint.reject(endedEarly(text))
    else if (event === "exit") this.gone(Number(first), running)
  }

  private gone(pid: number, running: Running) {
    this.running.delete(pid)
    running.gone = true
    running.endpoint.reject(endedEarly(""))
    running.exited.resolve()
    this.hold()
  }

  private lost() {
    if (this.dead) return
    this.dead = true
    for (const started of this.waiting.values()) started.reject(new Error("the spawner is gone"))
    this.waiting.clear()
    for (const [pid, running] of this.running) {
      killStarted(pid)
      this.gone(pid, running)
    }
  }
}

/** The most a request may hold (the spawner's own limit). */
const MAX_REQUEST = 4 * 1024 * 1024

let link: Link | undefined
/** Whether the set-up built the spawner (looked at once a process). */
let built: boolean | undefined

const viaSpawner = (
  file: string,
  args: ReadonlyArray<string>,
  env: NodeJS.ProcessEnv,
  deadline: Promise<never>
): Promise<Omit<Spawned, "endpoint"> & { readonly endpoint: Promise<string> }> => {
  if (link === undefined || link.dead) link = new Link(SPAWNER)
  const current = link
  const { id, started } = current.start(file, args, env)
  return Promise.race([started, deadline]).then(
    (running) => ({
      pid: running.pid,
      endpoint: running.endpoint.promise,
      exited: running.exited.promise,
      hasExited: () => running.gone
    }),
    (error) => {
      current.abandon(id)
      throw error
    }
  )
}

/** Without the spawner (not built): the service forks the program itself and reads its stderr. */
const viaNode = (file: string, args: ReadonlyArray<string>, env: NodeJS.ProcessEnv) => {
  const child = spawn(file, args, { detached: true, env, stdio: ["ignore", "ignore", "pipe"] })
  const exited = new Promise<void>((resolve) => {
    child.once("exit", () => resolve())
    child.once("error", () => resolve())
  })
  if (child.pid === undefined) throw new Error("cannot start it")
  const endpoint = new Promise<string>((resolve, reject) => {
    let output = ""
    const stderr = child.stderr!
    const onData = (chunk: Buffer) => {
      output += chunk.toString("utf8")
      const match = /DevTools listening on (ws:\/\/\S+)/.exec(output)
      if (match) done(undefined, match[1])
    }
    const onEnd = () => done(endedEarly(output.slice(-500)))
    const done = (error?: Error, url?: string) => {
      stderr.off("data", onData)
      stderr.off("end", onEnd)
      // Keep draining stderr so Chromium never blocks on a full pipe.
      stderr.resume()
      if (error) reject(error)
      else resolve(url!)
    }
    stderr.on("data", onData)
    stderr.on("end", onEnd)
  })
  endpoint.catch(() => undefined)
  return {
    pid: child.pid,
    endpoint,
    exited,
    hasExited: () => child.exitCode !== null || child.signalCode !== null
  }
}

/**
 * Starts `file` (with `args` and exactly `env`) in a process group of its
 * own: through the resident `rbs-spawner` when it is built, so the service
 * never forks its own large process, else with Node's `spawn`.
 */
export const start = async (
  file: string,
  args: ReadonlyArray<string>,
  env: NodeJS.ProcessEnv,
  timeoutMs: number
): Promise<Spawned> => {
  built ??= FsSync.existsSync(SPAWNER)
  // One deadline from the ask to the DevTools line: a spawner that stalls fails the launch too.
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no DevTools endpoint after ${timeoutMs} ms`)), timeoutMs)
  })
  deadline.catch(() => undefined)
  try {
    const spawned = built ? await viaSpawner(file, args, env, deadline) : viaNode(file, args, env)
    const endpoint = Promise.race([spawned.endpoint, deadline]).finally(() => clearTimeout(timer))
    endpoint.catch(() => undefined)
    return { ...spawned, endpoint }
  } catch (error) {
    clearTimeout(timer)
    throw error
  }
}
