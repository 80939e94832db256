// A raw CDP client and the measures the relay benches take with it. See bench/README.md.
import WebSocket from "ws"

const SEQUENTIAL = Number(process.env.BENCH_SEQUENTIAL ?? 500)
const IN_FLIGHT = Number(process.env.BENCH_IN_FLIGHT ?? 1000)
const LARGE_MB = Number(process.env.BENCH_LARGE_MB ?? 20)
const log = (message: string) => process.stderr.write(`[bench] ${message}\n`)

/** A raw CDP client: ids, a promise per command, a page session to run commands in. */
export const open = async (url: string, headers: Record<string, string>) => {
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
    targetId: page.targetId as string,
    send: (method: string, params: object = {}) => send(method, params, sessionId),
    close: () => socket.close()
  }
}

export type Client = Awaited<ReturnType<typeof open>>

export const mean = (values: Array<number>) => values.reduce((sum, value) => sum + value, 0) / values.length
export const percentile = (values: Array<number>, p: number) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))]!

const evaluate = async (client: Client) => {
  const started = performance.now()
  await client.send("Runtime.evaluate", { expression: "1+1" })
  return performance.now() - started
}

/** Mean round trip of IN_FLIGHT commands sent at once. */
const inFlight = async (client: Client) =>
  mean(await Promise.all(Array.from({ length: IN_FLIGHT }, () => evaluate(client))))

const large = async (client: Client) => {
  const started = performance.now()
  const answer = await client.send("Runtime.evaluate", {
    expression: `"x".repeat(${LARGE_MB * 1024 * 1024})`,
    returnByValue: true
  })
  const ms = performance.now() - started
  if (answer.result?.result?.value?.length !== LARGE_MB * 1024 * 1024)
    throw new Error("the large answer was cut")
  return ms
}

/**
 * The paths measured turn about, so a slow moment of this machine falls on
 * all of them alike: one command on each in turn for the one-at-a-time
 * figures, then per round the in-flight and large figures, in an order that
 * rotates each round.
 */
export const measure = async <PathName extends string>(
  PATHS: ReadonlyArray<PathName>,
  clients: Record<PathName, Client>,
  rounds: number
) => {
  const single = Object.fromEntries(PATHS.map((path) => [path, [] as Array<number>])) as Record<
    PathName,
    Array<number>
  >
  const flights = structuredClone(single)
  const larges = structuredClone(single)
  for (let i = 0; i < SEQUENTIAL; i++)
    for (const path of PATHS) single[path].push(await evaluate(clients[path]))
  for (let round = 0; round < rounds; round++) {
    const order = PATHS.map((_, k) => PATHS[(k + round) % PATHS.length]!)
    for (const path of order) flights[path].push(await inFlight(clients[path]))
    for (const path of order) larges[path].push(await large(clients[path]))
    log(
      `round ${round + 1} of ${rounds} (in flight / large, ms): ${PATHS.map((path) => `${path} ${flights[path][round]!.toFixed(1)} / ${larges[path][round]!.toFixed(0)}`).join(", ")}`
    )
  }
  return { single, flights, larges }
}

export const median = (values: Array<number>) => percentile(values, 0.5)

/** One uncounted round (the relay paths and the clients get compiled), then `rounds`; the clients are closed after. */
export const measureWarm = async <PathName extends string>(
  PATHS: ReadonlyArray<PathName>,
  clients: Record<PathName, Client>,
  rounds: number
) => {
  await measure(PATHS, clients, 1)
  const measured = await measure(PATHS, clients, rounds)
  for (const client of Object.values<Client>(clients)) client.close()
  return measured
}
