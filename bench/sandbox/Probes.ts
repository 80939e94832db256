// The bench's measurements, one sandbox session at a time: create to ready,
// an exec round trip, a PTY keystroke's echo,
// and a 16 MiB upload and download. See bench/README.md.
import * as Crypto from "node:crypto"
import WebSocket from "ws"
import { call, json, sleep } from "../session-lifecycle/TargetService.ts"

const READY_TIMEOUT_MS = 60_000
/** As bench/session-lifecycle polls: `ready` is the first GET that says so. */
const POLL_MS = 5

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes).slice(0, 500)

export interface Target {
  readonly baseUrl: string
  readonly key: string
}

/** Every session the bench created and has not deleted yet: the clean-up deletes what is left. */
export const open = new Set<string>()

export interface CreateSample {
  readonly id: string
  /** `POST /v1/sessions` sent → 201 body read. */
  readonly create: number
  /** `POST /v1/sessions` sent → first `GET /v1/sessions/{id}` that says `ready`. */
  readonly ready: number
}

/** A sandbox session, polled to `ready`; `image` undefined is the node's default (the pool's). */
export const createSandbox = async ({ baseUrl, key }: Target, image?: string): Promise<CreateSample> => {
  const t0 = performance.now()
  const created = await call(baseUrl, "POST", "/v1/sessions", {
    key,
    body: { session_type: "sandbox", ...(image === undefined ? {} : { image }) }
  })
  const create = performance.now() - t0
  if (created.status !== 201) throw new Error(`create: HTTP ${created.status}: ${text(created.bytes)}`)
  const id: string = json(created.bytes).id
  open.add(id)
  while (true) {
    const polled = await call(baseUrl, "GET", `/v1/sessions/${id}`, { key })
    const status: string = json(polled.bytes).status
    if (status === "ready") break
    if (status !== "creating") throw new Error(`session ${id} became ${status} instead of ready`)
    if (performance.now() - t0 > READY_TIMEOUT_MS) throw new Error(`session ${id} never became ready`)
    await sleep(POLL_MS)
  }
  return { id, create, ready: performance.now() - t0 }
}

/** `DELETE /v1/sessions/{id}`, timed (sent → 204). */
export const deleteSession = async ({ baseUrl, key }: Target, id: string) => {
  const t0 = performance.now()
  const removed = await call(baseUrl, "DELETE", `/v1/sessions/${id}`, { key })
  const ms = performance.now() - t0
  if (removed.status !== 204 && removed.status !== 404 && removed.status !== 409)
    throw new Error(`delete ${id}: HTTP ${removed.status}: ${text(removed.bytes)}`)
  open.delete(id)
  return ms
}

/** `POST /v1/sessions/{id}/exec` of `["true"]`: sent → the JSON result read, which must say exit 0. */
export const execTrue = async ({ baseUrl, key }: Target, id: string) => {
  const t0 = performance.now()
  const response = await call(baseUrl, "POST", `/v1/sessions/${id}/exec`, {
    key,
    body: { command: ["true"] }
  })
  const ms = performance.now() - t0
  const result = response.status === 200 ? json(response.bytes) : undefined
  if (result?.status !== "exited" || result.exit_code !== 0)
    throw new Error(`exec: HTTP ${response.status}: ${text(response.bytes)}`)
  return ms
}

/** A PTY client: the binary output as it arrives, and a way to wait on it. */
const openPty = (wsUrl: string, key: string) =>
  new Promise<{ socket: WebSocket; output: { text: string }; changed: () => Promise<void> }>(
    (resolve, reject) => {
      const socket = new WebSocket(wsUrl, {
        headers: { authorization: `Bearer ${key}` },
        perMessageDeflate: false
      })
      const output = { text: "" }
      let wake: (() => void) | undefined
      socket.on("message", (data: Buffer, isBinary) => {
        if (!isBinary) return
        output.text += data.toString("utf8")
        wake?.()
      })
      // A closed socket (the shell gone, or the echo's deadline) wakes a waiter too.
      socket.once("close", () => wake?.())
      socket.once("unexpected-response", (_request, response) =>
        reject(new Error(`pty refused: HTTP ${response.statusCode}`))
      )
      socket.once("error", reject)
      socket.once("open", () =>
        resolve({
          socket,
          output,
          changed: () => new Promise<void>((done) => (wake = done))
        })
      )
    }
  )

/** Waits until the terminal has printed nothing for `quietMs` (the prompt drawn, a line cleared). */
const settle = async (output: { text: string }, quietMs: number) => {
  let seen = output.text.length
  while (true) {
    await sleep(quietMs)
    if (output.text.length === seen) return
    seen = output.text.length
  }
}

/**
 * Keystroke echo through `/v1/sessions/{id}/pty`: at the shell's prompt
 * (bash's readline, which echoes what it reads), one character sent, timed
 * until its echo arrives, `count` times. Every 100 characters the line is
 * cleared (Ctrl-U) outside the timing; the terminal is 1000 columns wide so
 * no echo wraps.
 */
export const ptyEcho = async ({ baseUrl, key }: Target, id: string, count: number) => {
  const wsUrl = `${baseUrl.replace(/^http/, "ws")}/v1/sessions/${id}/pty?cols=1000&rows=50`
  const pty = await openPty(wsUrl, key)
  const samples: Array<number> = []
  try {
    await settle(pty.output, 300)
    for (let i = 0; i < count; i++) {
      if (i > 0 && i % 100 === 0) {
        pty.socket.send(Buffer.from([0x15]))
        await settle(pty.output, 100)
      }
      const char = String.fromCharCode(97 + (i % 26))
      const from = pty.output.text.length
      const changed = pty.changed()
      const t0 = performance.now()
      pty.socket.send(Buffer.from(char))
      const deadline = setTimeout(() => pty.socket.terminate(), 5_000)
      let waiting = changed
      while (!pty.output.text.slice(from).includes(char)) {
        if (pty.socket.readyState !== WebSocket.OPEN)
          throw new Error(
            `no echo of ${JSON.stringify(char)}: ${JSON.stringify(pty.output.text.slice(from))}`
          )
        await waiting
        waiting = pty.changed()
      }
      samples.push(performance.now() - t0)
      clearTimeout(deadline)
    }
  } finally {
    pty.socket.close()
  }
  return samples
}

export interface TransferSample {
  readonly uploadMs: number
  readonly downloadMs: number
}

/**
 * `bytes` uploaded (multipart, fields `path` and `file`) to `path`, sent →
 * 200 read, then downloaded (`GET .../download?path=`), sent → last byte
 * read; the download must give the same bytes back (checked after the timing).
 */
export const transfer = async (
  { baseUrl, key }: Target,
  id: string,
  path: string,
  bytes: Uint8Array
): Promise<TransferSample> => {
  const form = new FormData()
  form.append("path", path)
  form.append("file", new Blob([bytes]), "upload.bin")
  const t0 = performance.now()
  const uploaded = await fetch(`${baseUrl}/v1/sessions/${id}/upload`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}` },
    body: form
  })
  const uploadBody = new Uint8Array(await uploaded.arrayBuffer())
  const uploadMs = performance.now() - t0
  if (uploaded.status !== 200) throw new Error(`upload: HTTP ${uploaded.status}: ${text(uploadBody)}`)
  const t1 = performance.now()
  const query = new URLSearchParams({ path })
  const downloaded = await call(baseUrl, "GET", `/v1/sessions/${id}/download?${query}`, { key })
  const downloadMs = performance.now() - t1
  if (downloaded.status !== 200)
    throw new Error(`download: HTTP ${downloaded.status}: ${text(downloaded.bytes)}`)
  const digest = (data: Uint8Array) => Crypto.createHash("sha256").update(data).digest("hex")
  if (digest(downloaded.bytes) !== digest(bytes)) throw new Error("download: not the bytes uploaded")
  return { uploadMs, downloadMs }
}
