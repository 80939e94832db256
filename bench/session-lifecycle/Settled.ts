// The settled mode: one session at a time on a quiet machine (the pool full
// and nothing launching), to show what the service itself costs when no
// Chromium launch or teardown competes for the CPU. See bench/README.md.
import puppeteer from "puppeteer-core"
import { pageTargetId, sessionBrowserEndpoint } from "./SessionBrowser.ts"
import { call, createSession, json, sleep, waitForService } from "./TargetService.ts"

export const SETTLED_PHASES = ["create", "ready", "get", "connect", "connectDirect", "delete"] as const
export type SettledPhase = (typeof SETTLED_PHASES)[number]

/** The machine's quiet: the pool at its target, then a moment for the last launch's tail. */
const quiet = async (baseUrl: string) => {
  await waitForService(baseUrl, true)
  await sleep(300)
}

/** `puppeteer.connect` and the first page in hand, as the lifecycle flows' `connect` phase. */
const connect = async (endpoint: string, headers: Record<string, string>) => {
  const started = performance.now()
  const browser = await puppeteer.connect({ browserWSEndpoint: endpoint, headers, defaultViewport: null })
  await browser.pages()
  const ms = performance.now() - started
  await browser.disconnect()
  return ms
}

/**
 * One settled session: create, poll to ready, a GET (an authenticated
 * request's floor), connect through the relay and, when the service's data
 * dir is known, straight to the same Chromium (puppeteer's own handshake),
 * then DELETE. Each step starts on a quiet machine.
 */
export const settledIteration = async (
  baseUrl: string,
  key: string,
  dataDir: string | undefined,
  round: number
): Promise<Partial<Record<SettledPhase, number>>> => {
  await quiet(baseUrl)
  const t0 = performance.now()
  const created = await createSession(baseUrl, key)
  const create = performance.now() - t0
  if (created.status !== 201) throw new Error(`create: HTTP ${created.status}`)
  const session: { id: string; cdp_url: string } = json(created.bytes)
  while (json((await call(baseUrl, "GET", `/v1/sessions/${session.id}`, { key })).bytes).status !== "ready")
    await sleep(5)
  const ready = performance.now() - t0
  await quiet(baseUrl)
  const t1 = performance.now()
  await call(baseUrl, "GET", `/v1/sessions/${session.id}`, { key })
  const get = performance.now() - t1
  const endpoint =
    dataDir === undefined
      ? undefined
      : await sessionBrowserEndpoint(dataDir, await pageTargetId(session.cdp_url, key))
  const viaRelay = () => connect(session.cdp_url, { Authorization: `Bearer ${key}` })
  const straight = () => (endpoint === undefined ? Promise.resolve(undefined) : connect(endpoint, {}))
  // The browser's first client pays for some of its set-up: the two go first by turns.
  let relayed: number
  let direct: number | undefined
  if (round % 2 === 0) {
    relayed = await viaRelay()
    direct = await straight()
  } else {
    direct = await straight()
    relayed = await viaRelay()
  }
  await sleep(200)
  const t2 = performance.now()
  const removed = await call(baseUrl, "DELETE", `/v1/sessions/${session.id}`, { key })
  const remove = performance.now() - t2
  if (removed.status !== 204) throw new Error(`delete: HTTP ${removed.status}`)
  return {
    create,
    ready,
    get,
    connect: relayed,
    ...(direct === undefined ? {} : { connectDirect: direct }),
    delete: remove
  }
}
