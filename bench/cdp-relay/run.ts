// CDP through the service's relay against CDP straight to a Chromium, in the
// same run: one command at a time, 1000 in flight, and one 20 MB answer.
// See bench/README.md.
import puppeteer from "puppeteer-core"
import WebSocket from "ws"
import { call, json, signUp, sleep, startInProcess } from "../session-lifecycle/TargetService.ts"

const SEQUENTIAL = Number(process.env.BENCH_SEQUENTIAL ?? 500)
const IN_FLIGHT = Number(process.env.BENCH_IN_FLIGHT ?? 1000)
const LARGE_MB = Number(process.env.BENCH_LARGE_MB ?? 20)
const log = (message: string) => process.stderr.write(`[bench] ${message}\n`)

/** A raw CDP client: ids, a promise per command, a page session to run commands in. */
const open = async (url: string, headers: Record<string, string>) => {
  const socket = new WebSocket(url, { headers, perMessageDeflate: false, maxPayload: 512 * 1024 * 1024 })
  await new Promise((resolve, reject) => socket.once("open", resolve).once("error", reject))
  let next = 1
  const pending = new Map<number, (message: any) => void>()
  socket.on("message", (data) => {
    const message = JSON.parse(data.toString())
    if (message.id !== undefined) pending.get(message.id)?.(message)
  })
  const send = (method: string, params: object = {}, sessionId?: string) =>
    new Promise<any>((resolve) => {
      const id = next++
      pending.set(id, (message) => {
        pending.delete(id)
        resolve(message)
      })
      socket.send(JSON.stringify({ id, method, params, ...(sessionId === undefined ? {} : { sessionId }) }))
    })
  const targets = await send("Target.getTargets")
  const page = targets.result.targetInfos.find((target: any) => target.type === "page")
  const attached = await send("Target.attachToTarget", { targetId: page.targetId, flatten: true })
  const sessionId: string = attached.result.sessionId
  return {
    send: (method: string, params: object = {}) => send(method, params, sessionId),
    close: () => socket.close()
  }
}

const measure = async (client: Awaited<ReturnType<typeof open>>) => {
  const oneAtATime: Array<number> = []
  for (let i = 0; i < SEQUENTIAL; i++) {
    const started = performance.now()
    await client.send("Runtime.evaluate", { expression: "1+1" })
    oneAtATime.push(performance.now() - started)
  }
  const started = performance.now()
  const roundTrips = await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      const sent = performance.now()
      await client.send("Runtime.evaluate", { expression: "1+1" })
      return performance.now() - sent
    })
  )
  const inFlightWall = performance.now() - started
  const large = performance.now()
  const answer = await client.send("Runtime.evaluate", {
    expression: `"x".repeat(${LARGE_MB * 1024 * 1024})`,
    returnByValue: true
  })
  const largeMs = performance.now() - large
  if (answer.result?.result?.value?.length !== LARGE_MB * 1024 * 1024)
    throw new Error("the large answer was cut")
  const mean = (values: Array<number>) => values.reduce((sum, value) => sum + value, 0) / values.length
  return {
    oneAtATimeMeanMs: mean(oneAtATime),
    inFlightMeanRoundTripMs: mean(roundTrips),
    inFlightWallMs: inFlightWall,
    largeMs
  }
}

const service = await startInProcess(1, process.env.CHROME_PATH)
const direct = await puppeteer.launch({
  executablePath: process.env.CHROME_PATH ?? "/usr/bin/chromium",
  headless: true,
  handleSIGINT: false,
  handleSIGTERM: false,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
})
try {
  const key = await signUp(service.baseUrl)
  const created = await call(service.baseUrl, "POST", "/v1/sessions", { key, body: {} })
  const session: { id: string; cdp_url: string } = json(created.bytes)
  while (
    json((await call(service.baseUrl, "GET", `/v1/sessions/${session.id}`, { key })).bytes).status !== "ready"
  )
    await sleep(10)
  const rounds = Number(process.env.BENCH_ROUNDS ?? 3)
  const results: Record<"relay" | "direct", Array<Awaited<ReturnType<typeof measure>>>> = {
    relay: [],
    direct: []
  }
  for (let round = 0; round < rounds; round++) {
    const relayed = await open(session.cdp_url, { authorization: `Bearer ${key}` })
    results.relay.push(await measure(relayed))
    relayed.close()
    const straight = await open(direct.wsEndpoint(), {})
    results.direct.push(await measure(straight))
    straight.close()
    log(`round ${round + 1} of ${rounds}`)
  }
  const median = (values: Array<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
  const row = (label: string, pick: (r: Awaited<ReturnType<typeof measure>>) => number, unit: string) => {
    const relay = median(results.relay.map(pick))
    const straight = median(results.direct.map(pick))
    return `${label.padEnd(34)} ${relay.toFixed(2).padStart(9)} ${straight.toFixed(2).padStart(9)} ${unit}  ${(relay / straight).toFixed(2)}x`
  }
  console.log(
    [
      "",
      `CDP relay vs direct (median of ${rounds} rounds; the relayed browser is sandboxed under its own user)`,
      `${"".padEnd(34)} ${"relay".padStart(9)} ${"direct".padStart(9)}`,
      row(`one at a time, mean of ${SEQUENTIAL}`, (r) => r.oneAtATimeMeanMs, "ms"),
      row(`${IN_FLIGHT} in flight, mean round trip`, (r) => r.inFlightMeanRoundTripMs, "ms"),
      row(`${LARGE_MB} MB evaluate`, (r) => r.largeMs, "ms"),
      ""
    ].join("\n")
  )
  await call(service.baseUrl, "DELETE", `/v1/sessions/${session.id}`, { key })
} finally {
  await direct.close()
  await service.stop()
}
