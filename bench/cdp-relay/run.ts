// CDP through the service's relay against CDP straight to the same Chromium
// (the relay's own cost) and to a Chromium launched by puppeteer, in the same
// run: one command at a time, 1000 in flight, and one 20 MB answer.
// See bench/README.md.
import { executableOf } from "../../src/runtimes/browser/Chromium.ts"
import { spawn } from "node:child_process"
import puppeteer from "puppeteer-core"
import { type Client, mean, measureWarm, median, open } from "./Measure.ts"
import { sessionBrowserEndpoint } from "../session-lifecycle/SessionBrowser.ts"
import {
  call,
  json,
  signUp,
  sleep,
  startChildProcess,
  startInProcess
} from "../session-lifecycle/TargetService.ts"

const SEQUENTIAL = Number(process.env.BENCH_SEQUENTIAL ?? 500)
const IN_FLIGHT = Number(process.env.BENCH_IN_FLIGHT ?? 1000)
const LARGE_MB = Number(process.env.BENCH_LARGE_MB ?? 20)

const PATHS = ["relay", "pipe", "same", "launched"] as const
type PathName = (typeof PATHS)[number]

/**
 * Starts TcpPipe.ts towards `endpoint` (a port, or a cell's DevTools socket: `ws+unix:<socket>:<path>`):
 * the same endpoint, one bare process hop away.
 */
const tcpPipe = async (endpoint: string) => {
  const unix = /^ws\+unix:(.+):(\/devtools\/.*)$/.exec(endpoint)
  const url = unix === null ? new URL(endpoint) : undefined
  const target = unix === null ? url!.port : unix[1]!
  const path = unix === null ? url!.pathname : unix[2]!
  const child = spawn(
    process.execPath,
    ["--experimental-strip-types", new URL("./TcpPipe.ts", import.meta.url).pathname, target],
    {
      stdio: ["ignore", "pipe", "inherit"]
    }
  )
  const port = await new Promise<string>((resolve, reject) => {
    child.stdout!.once("data", (chunk: Buffer) => resolve(chunk.toString().trim()))
    child.once("exit", () => reject(new Error("the TCP pipe did not start")))
  })
  return { endpoint: `ws://127.0.0.1:${port}${path}`, stop: () => child.kill("SIGTERM") }
}

const service =
  process.env.BENCH_IN_PROCESS === "1"
    ? await startInProcess(1, process.env.CHROME_PATH)
    : await startChildProcess({ BROWSER_POOL_SIZE: "1" }, process.env.CHROME_PATH)
const direct = await puppeteer.launch({
  // The binary Debian's launcher script would exec, as the service runs it (`executableOf`).
  executablePath: executableOf(process.env.CHROME_PATH ?? "/usr/bin/chromium"),
  headless: true,
  handleSIGINT: false,
  handleSIGTERM: false,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
})
let pipe: Awaited<ReturnType<typeof tcpPipe>> | undefined
try {
  const key = await signUp(service.baseUrl)
  const created = await call(service.baseUrl, "POST", "/v1/sessions", { key, body: {} })
  const session: { id: string; cdp_url: string } = json(created.bytes)
  while (
    json((await call(service.baseUrl, "GET", `/v1/sessions/${session.id}`, { key })).bytes).status !== "ready"
  )
    await sleep(10)
  const rounds = Number(process.env.BENCH_ROUNDS ?? 5)
  const relayed = await open(session.cdp_url, { authorization: `Bearer ${key}` })
  const sessionBrowser = await sessionBrowserEndpoint(service.dataDir!, relayed.targetId)
  pipe = await tcpPipe(sessionBrowser)
  const clients: Record<PathName, Client> = {
    relay: relayed,
    pipe: await open(pipe.endpoint, {}),
    same: await open(sessionBrowser, {}),
    launched: await open(direct.wsEndpoint(), {})
  }
  const { single, flights, larges } = await measureWarm(PATHS, clients, rounds)
  const row = (
    label: string,
    figures: Record<PathName, Array<number>>,
    pick: (values: Array<number>) => number
  ) => {
    const [relay, piped, same, launched] = PATHS.map((path) => pick(figures[path])) as [
      number,
      number,
      number,
      number
    ]
    const cell = (value: number) => value.toFixed(2).padStart(9)
    const ratio = (value: number) => `${value.toFixed(2)}x`.padStart(9)
    return `${label.padEnd(32)} ${cell(relay)} ${cell(piped)} ${cell(same)} ${cell(launched)} ms ${ratio(relay / same)} ${ratio(piped / same)} ${ratio(relay / launched)}`
  }
  const head = (...names: Array<string>) => names.map((name) => name.padStart(9)).join(" ")
  console.log(
    [
      "",
      `CDP through the relay and straight to Chromium. "pipe": a bare TCP pipe process in front of the`,
      `session's Chromium (the least any relay process costs); "same": straight to the session's own`,
      `sandboxed Chromium; "launched": straight to a Chromium puppeteer launched, unjailed.`,
      `${"".padEnd(32)} ${head("relay", "pipe", "same", "launched")}    ${head("relay/same", "pipe/same", "relay/launched")}`,
      row(`one at a time, p50 of ${SEQUENTIAL}`, single, median),
      row(`one at a time, mean of ${SEQUENTIAL}`, single, mean),
      row(`${IN_FLIGHT} in flight, mean round trip`, flights, median),
      row(`${LARGE_MB} MB evaluate`, larges, median),
      `(in flight and large: median of ${rounds} rounds)`,
      ""
    ].join("\n")
  )
  await call(service.baseUrl, "DELETE", `/v1/sessions/${session.id}`, { key })
} finally {
  pipe?.stop()
  await direct.close()
  await service.stop()
}
