import { Effect } from "effect"
import * as FsSync from "node:fs"
import * as Http from "node:http"
import * as Path from "node:path"
import * as Cell from "../../src/runtimes/browser/Cell.ts"
import { cellPlace, profilesPlace } from "../../src/runtimes/browser/ProfilesPlace.ts"

// A service's browser cells as the host sees them: their dirs, their processes, and the DevTools
// inside each, reached as the service does (no relay, no guard).

/** The cell dirs of the service on `dataDir`, one per running browser. */
export const cellDirs = (dataDir: string) => {
  const placed = profilesPlace(dataDir, undefined)
  if (typeof placed === "string") throw new Error(placed)
  const { base, prefix } = cellPlace(placed)
  return FsSync.readdirSync(base)
    .filter((name) => name.startsWith(prefix))
    .map((name) => Path.join(base, name))
}

const read = (path: string) => {
  try {
    return FsSync.readFileSync(path, "utf8")
  } catch {
    return ""
  }
}

/** The processes of the host, with their command lines and process groups. */
const processes = () =>
  FsSync.readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .map((entry) => {
      const stat = read(`/proc/${entry}/stat`)
      const after = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      return { pid: Number(entry), pgrp: Number(after[2]), args: read(`/proc/${entry}/cmdline`).split("\0") }
    })

/** A cell's processes: its own two (`rbs-cell`), and Chromium's main process among all of its. */
export const processesOf = (cellDir: string) => {
  const all = processes()
  const cell = all.filter((each) => each.args[0] === Cell.CELL_EXEC && each.args.includes(cellDir))
  if (cell.length === 0) throw new Error(`no cell process for ${cellDir}`)
  const group = all.filter((each) => each.pgrp === cell[0]!.pgrp)
  const chromium = group.find(
    (each) => each.args[0]!.endsWith("/chromium") && !each.args.some((arg) => arg.startsWith("--type="))
  )
  if (chromium === undefined) throw new Error(`no Chromium in the cell ${cellDir}`)
  return { group: group.map((each) => each.pid), cell: cell.map((each) => each.pid), chromium: chromium.pid }
}

/** `processesOf`, or `undefined` for a cell whose processes are gone (its browser ending). */
export const liveProcessesOf = (cellDir: string) => {
  try {
    return processesOf(cellDir)
  } catch {
    return undefined
  }
}

/** The cell whose view shows the downloads of `sessionId`, if one does now. */
const cellShowing = (dataDir: string, sessionId: string) => {
  for (const dir of cellDirs(dataDir)) {
    // A cell an ended session left is being torn down: its processes may be gone before its dir.
    const live = liveProcessesOf(dir)
    if (live === undefined) continue
    if ((viewOf(live.chromium, Path.join(dataDir, "downloads")) ?? []).includes(sessionId)) return dir
  }
  return undefined
}

/**
 * The cell of the session `sessionId` of the service on `dataDir`: the one whose view shows its
 * downloads. A session's downloads are shown just after it is ready, so this waits for them (5 s).
 */
export const cellOfSession = (dataDir: string, sessionId: string) =>
  Effect.gen(function* () {
    for (let tries = 0; tries < 250; tries++) {
      const dir = cellShowing(dataDir, sessionId)
      if (dir !== undefined) return dir
      yield* Effect.sleep("20 millis")
    }
    return yield* Effect.die(new Error(`no cell shows the downloads of ${sessionId}`))
  })

/** The browser's DevTools endpoint in the cell of `cellDir`, as the host reaches it (`ws+unix:`). */
export const devtools = (cellDir: string) =>
  Effect.promise(
    () =>
      new Promise<string>((resolve, reject) => {
        Http.get({ socketPath: Cell.devtoolsSocket(cellDir), path: "/json/version" }, (response) => {
          let body = ""
          response.on("data", (chunk) => (body += chunk))
          response.on("end", () =>
            resolve(Cell.hostEndpoint(cellDir, JSON.parse(body).webSocketDebuggerUrl as string))
          )
        }).on("error", reject)
      })
  )

/** The socket inodes that listen (TCP, v4 and v6) in the network namespace of `pid` (`self`: this process's). */
export const listening = (pid: number | "self") => {
  const inodes = new Map<string, string>()
  for (const file of ["tcp", "tcp6"]) {
    for (const line of read(`/proc/${pid}/net/${file}`).trim().split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/)
      if (fields[3] === "0A") inodes.set(fields[9]!, fields[1]!)
    }
  }
  return inodes
}

/** The socket inodes `pid` holds open. */
export const socketsOf = (pid: number) => {
  const inodes: Array<string> = []
  let fds: Array<string> = []
  try {
    fds = FsSync.readdirSync(`/proc/${pid}/fd`)
  } catch {
    return inodes
  }
  for (const fd of fds) {
    try {
      const link = FsSync.readlinkSync(`/proc/${pid}/fd/${fd}`)
      const inode = /^socket:\[(\d+)\]$/.exec(link)?.[1]
      if (inode !== undefined) inodes.push(inode)
    } catch {
      // closed meanwhile
    }
  }
  return inodes
}

/** The profile dir Chromium's process `pid` runs on (its `--user-data-dir`). */
export const profileOf = (pid: number) => {
  const args = read(`/proc/${pid}/cmdline`).split("\0")
  return args.find((arg) => arg.startsWith("--user-data-dir="))!.slice("--user-data-dir=".length)
}

/** What `pid` sees at `path` of its own root (its mount namespace's view). */
export const viewOf = (pid: number, path: string) => {
  try {
    return FsSync.readdirSync(Path.join(`/proc/${pid}/root`, path)).sort()
  } catch {
    return undefined
  }
}
