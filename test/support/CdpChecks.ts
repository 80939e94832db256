// Relay behaviours checked on a raw CDP socket, shared by the single-node relay
// tests and the cluster tests (the same checks through the node hop).
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import WebSocket from "ws"

/** Opens a raw WebSocket; resolves with the HTTP status of a refused upgrade, or the open socket. */
export const rawConnect = (url: string, headers: Record<string, string> = {}) =>
  Effect.promise(
    () =>
      new Promise<{ status: number; body: string; socket?: WebSocket }>((resolve) => {
        const socket = new WebSocket(url, { headers })
        socket.once("open", () => resolve({ status: 101, body: "", socket }))
        socket.once("unexpected-response", (_request, response) => {
          let body = ""
          response.on("data", (chunk: Buffer) => (body += chunk))
          response.on("end", () => resolve({ status: response.statusCode ?? 0, body }))
        })
        socket.once("error", () => undefined)
      })
  )

export const cdpCall = (socket: WebSocket, id: number, method: string, params: object = {}) =>
  Effect.promise(
    () =>
      new Promise<any>((resolve) => {
        const onMessage = (data: Buffer) => {
          const message = JSON.parse(data.toString())
          if (message.id === id) {
            socket.off("message", onMessage)
            resolve(message)
          }
        }
        socket.on("message", onMessage)
        socket.send(JSON.stringify({ id, method, params }))
      })
  )

/**
 * A thousand commands in flight, each logging its own id: every console
 * event arrives before its command's answer and the answers in order; then
 * 12 MiB from the client (a long expression) and 20 MiB back from Chromium.
 */
export const orderAndLargeFrames = (cdpUrl: string, key: string) =>
  Effect.gen(function* () {
    const connected = yield* rawConnect(cdpUrl, { authorization: `Bearer ${key}` })
    const socket = connected.socket!
    const targets = yield* cdpCall(socket, 1, "Target.getTargets")
    const page = targets.result.targetInfos.find((target: any) => target.type === "page")
    const attached = yield* cdpCall(socket, 2, "Target.attachToTarget", {
      targetId: page.targetId,
      flatten: true
    })
    const sessionId: string = attached.result.sessionId
    const inPage = (id: number, method: string, params: object) =>
      socket.send(JSON.stringify({ id, method, params, sessionId }))

    const order: Array<string> = []
    const done = new Promise<void>((resolve) => {
      socket.on("message", (data: Buffer) => {
        const message = JSON.parse(data.toString())
        if (message.method === "Runtime.consoleAPICalled") order.push(`event ${message.params.args[0].value}`)
        else if (message.id >= 1000) order.push(`answer ${message.id}`)
        if (message.id === 1999) resolve()
      })
    })
    inPage(3, "Runtime.enable", {})
    for (let id = 1000; id < 2000; id++) inPage(id, "Runtime.evaluate", { expression: `console.log(${id})` })
    yield* Effect.promise(() => done)
    assert.lengthOf(order, 2000)
    for (let id = 1000; id < 2000; id++) {
      assert.isBelow(order.indexOf(`event ${id}`), order.indexOf(`answer ${id}`), `command ${id}`)
      if (id > 1000) assert.isBelow(order.indexOf(`answer ${id - 1}`), order.indexOf(`answer ${id}`))
    }

    // The client's frames stop at the relay's limit (16 MiB); Chromium's answers pass at any size.
    const sent = 12 * 1024 * 1024
    const size = 20 * 1024 * 1024
    const answered = new Promise<any>((resolve) =>
      socket.on("message", (data: Buffer) => {
        if (data.length > size) resolve(JSON.parse(data.toString()))
      })
    )
    inPage(4, "Runtime.evaluate", {
      expression: `"${"y".repeat(sent)}".length + "x".repeat(${size})`,
      returnByValue: true
    })
    const big: string = (yield* Effect.promise(() => answered)).result.result.value
    assert.strictEqual(big.length, String(sent).length + size)
    assert.isTrue(big.startsWith(`${sent}xxx`))
    socket.close()
  })

/**
 * A binary frame is refused whatever it holds (JSON, or CBOR, which Chromium
 * would read), with the id-less CDP error an unreadable frame gets; the
 * connection goes on.
 */
export const refusesBinaryFrames = (cdpUrl: string, key: string) =>
  Effect.gen(function* () {
    const connected = yield* rawConnect(cdpUrl, { authorization: `Bearer ${key}` })
    const socket = connected.socket!
    const answer = new Promise<any>((resolve) =>
      socket.on("message", (data: Buffer) => {
        const message = JSON.parse(data.toString())
        if (message.id === undefined && message.method === undefined) resolve(message)
      })
    )
    socket.send(Buffer.from(JSON.stringify({ id: 9, method: "Browser.getVersion" })), { binary: true })
    const refused = yield* Effect.promise(() => answer)
    assert.strictEqual(refused.error.code, -32700)
    assert.match(refused.error.message, /binary frames are not accepted/)
    assert.match((yield* cdpCall(socket, 10, "Browser.getVersion")).result.product, /Chrome/)
    socket.close()
  })
