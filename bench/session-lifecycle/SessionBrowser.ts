// Reaching a session's own Chromium straight, past the relay: what the
// benches compare the relay with. Needs the service's data dir (a service
// the bench started).
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import WebSocket from "ws"
import { profilesPlace } from "../../src/runtimes/browser/ProfilesPlace.ts"

/**
 * The DevTools endpoint of the session's own Chromium, found by its page
 * target among the service's browsers (each writes `DevToolsActivePort` into
 * its profile dir, where `profilesPlace` puts it for the data dir).
 */
export const sessionBrowserEndpoint = async (dataDir: string, targetId: string): Promise<string> => {
  const placed = profilesPlace(dataDir, undefined)
  const roots = typeof placed === "string" ? [] : [placed.profilesDir]
  for (const root of roots) {
    for (const profile of await Fs.readdir(root).catch(() => [] as Array<string>)) {
      const file = await Fs.readFile(Path.join(root, profile, "DevToolsActivePort"), "utf8").catch(() => "")
      const [port, path] = file.split("\n")
      if (!port || !path) continue
      const response = await fetch(`http://127.0.0.1:${port}/json/list`)
      const targets = (await response.json()) as Array<{ id: string }>
      if (targets.some((target) => target.id === targetId)) return `ws://127.0.0.1:${port}${path}`
    }
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
