import { Effect } from "effect"
import * as Crypto from "node:crypto"

export interface Response {
  readonly status: number
  readonly headers: Headers
  readonly text: string
  readonly bytes: Uint8Array
  readonly json: any
}

export interface RequestOptions {
  readonly body?: unknown
  /** Sent as-is instead of JSON. */
  readonly rawBody?: string
  readonly contentType?: string
  readonly key?: string
  readonly cookie?: string
  readonly headers?: Record<string, string>
}

/** A plain HTTP request against the service under test, as any client would make it. */
export const request = (baseUrl: string, method: string, path: string, options: RequestOptions = {}) =>
  Effect.promise(async (): Promise<Response> => {
    const headers: Record<string, string> = { ...options.headers }
    let body: string | undefined
    if (options.rawBody !== undefined) {
      body = options.rawBody
      headers["content-type"] = options.contentType ?? "application/json"
    } else if (options.body !== undefined) {
      body = JSON.stringify(options.body)
      headers["content-type"] = options.contentType ?? "application/json"
    }
    if (options.key !== undefined) headers.authorization = `Bearer ${options.key}`
    if (options.cookie !== undefined) headers.cookie = options.cookie
    const response = await fetch(`${baseUrl}${path}`, {
      method,
      headers,
      ...(body === undefined ? {} : { body })
    })
    const bytes = new Uint8Array(await response.arrayBuffer())
    const text = new TextDecoder().decode(bytes)
    let json: unknown = undefined
    try {
      json = JSON.parse(text)
    } catch {
      // not JSON
    }
    return { status: response.status, headers: response.headers, text, bytes, json }
  })

export interface Account {
  readonly email: string
  readonly password: string
  readonly userId: string
  readonly cookie: string
  readonly key: string
  readonly keyId: string
}

export const uniqueEmail = () => `user-${Crypto.randomBytes(5).toString("hex")}@example.com`

/** Register, log in, and create an API key: what a newcomer does first. */
export const signUp = (baseUrl: string) =>
  Effect.gen(function* () {
    const email = uniqueEmail()
    const password = "correct horse battery staple"
    const registered = yield* request(baseUrl, "POST", "/auth/register", { body: { email, password } })
    if (registered.status !== 201)
      return yield* Effect.die(new Error(`register: ${registered.status} ${registered.text}`))
    const login = yield* request(baseUrl, "POST", "/auth/login", { body: { email, password } })
    const setCookie = login.headers.get("set-cookie") ?? ""
    const cookie = setCookie.split(";")[0]!
    const created = yield* request(baseUrl, "POST", "/v1/keys", { cookie, body: { name: "test" } })
    if (created.status !== 201) return yield* Effect.die(new Error(`key: ${created.status} ${created.text}`))
    return {
      email,
      password,
      userId: registered.json.user.id,
      cookie,
      key: created.json.secret,
      keyId: created.json.id
    } satisfies Account
  })

/** Polls a session until `predicate` holds (sessions change state in the background). */
export const waitForSession = (
  baseUrl: string,
  key: string,
  id: string,
  predicate: (session: any) => boolean,
  timeoutMs = 30_000
) =>
  Effect.gen(function* () {
    const deadline = Date.now() + timeoutMs
    while (true) {
      const response = yield* request(baseUrl, "GET", `/v1/sessions/${id}`, { key })
      if (predicate(response.json)) return response.json
      if (Date.now() > deadline) {
        return yield* Effect.die(new Error(`session ${id} never matched: ${response.text}`))
      }
      yield* Effect.sleep("25 millis")
    }
  })

export const isReady = (session: any) => session?.status === "ready"

/** Width and height from a PNG's IHDR chunk. */
export const pngSize = (bytes: Uint8Array) => {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  return { width: view.getUint32(16), height: view.getUint32(20) }
}

export const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]

/**
 * A value in `/metrics` text: the first line of `name` whose labels include `label` (`result="warm"`),
 * or whatever its labels; 0 when absent.
 */
export const metricValue = (text: string, name: string, label?: string) =>
  Number(
    new RegExp(
      label === undefined ? `^${name}(?:\\{[^}]*\\})? (\\d+)` : `^${name}\\{[^}]*${label}[^}]*\\} (\\d+)`,
      "m"
    ).exec(text)?.[1] ?? "0"
  )

/** `POST /v1/sessions` with `body` (201 asserted), then the session once it is `ready`. */
export const openSession = (baseUrl: string, key: string, body: object = {}) =>
  Effect.gen(function* () {
    const created = yield* request(baseUrl, "POST", "/v1/sessions", { key, body })
    if (created.status !== 201)
      return yield* Effect.die(new Error(`create: ${created.status} ${created.text}`))
    return yield* waitForSession(baseUrl, key, created.json.id, isReady)
  })
