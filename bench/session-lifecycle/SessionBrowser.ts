// Reaching a session's own Chromium straight, past the relay: what the
// benches compare the relay with. Needs the service's data dir (a service
// the bench started), and runs as the service's user (its cells' sockets are
// the service's alone).
import * as Fs from "node:fs/promises"
import * as Http from "node:http"
import * as Path from "node:path"
import WebSocket from "ws"
import * as Cell from "../../src/runtimes/browser/Cell.ts"
import { cellPlace, profilesPlace } from "../../src/runtimes/browser/ProfilesPlace.ts"

/** The DevTools targets of the browser in the cell of `cellDir`, asked through its socket. */
const targetsIn = (cellDir: string) =>
  new Promise<Array<{ id: string }>>((resolve) => {
    Http.get({ socketPath: Cell.devtoolsSocket(cellDir), path: "/json/list" }, (response) => {
      let body = ""
      response.on("data", (chunk) => (body += chunk))
      response.on("end", () => resolve(JSON.parse(body)))
    }).on("error", () => resolve([]))
  })

/**
 * The DevTools endpoint of the session's own Chromium, found by its page
 * target among the service's browsers: each in its cell, reached as the
 * service reaches it, through the cell's socket (`ws+unix:`; `cellPlace`
 * says where the data dir's cells are).
 */
export const sessionBrowserEndpoint = async (dataDir: string, targetId: string): Promise<string> => {
  const placed = profilesPlace(dataDir, undefined)
  if (typeof placed === "string") throw new Error(placed)
  const { base, prefix } = cellPlace(placed)
  for (const name of await Fs.readdir(base).catch(() => [] as Array<string>)) {
    if (!name.startsWith(prefix)) continue
    const cellDir = Path.join(base, name)
    const targets = await targetsIn(cellDir)
    if (!targets.some((target) => target.id === targetId)) continue
    const version = await new Promise<string>((resolve, reject) => {
      Http.get({ socketPath: Cell.devtoolsSocket(cellDir), path: "/json/version" }, (response) => {
        let body = ""
        response.on("data", (chunk) => (body += chunk))
        response.on("end", () => resolve(JSON.parse(body).webSocketDebuggerUrl))
      }).on("error", reject)
    })
    return Cell.hostEndpoint(cellDir, version)
  }
  throw new Error("the session's browser was not found")
}

/** The id of the first page target of the browser behind `cdpUrl` (asked through the relay). */
export const pageTargetId = async (cdpUrl: string, key: string): Promise<string> => {
  const socket = new WebSocket(cdpUrl, { headers: { authorization: `Bearer ${key}` } })
  try {
    await new Promise((resolve, reject) => socket.once("open", resolve).once("error", reject))
    const answer = await new Promise<any>((resolve) => {
      socket.once("message", (data: Buffer) => resolve(JSON.parse(data.toString())))
      socket.send(JSON.stringify({ id: 1, method: "Target.getTargets" }))
    })
    return answer.result.targetInfos.find((target: { type: string }) => target.type === "page").targetId
  } finally {
    socket.close()
  }
}
