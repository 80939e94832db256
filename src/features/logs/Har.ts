import type { Schema } from "effect"
import type { LogEvent } from "../../kernel/SessionLog.ts"

// A session's requests as HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/), from its log's
// `request` events: what a HAR viewer or Chrome DevTools opens. No bodies are kept, so none is in it.

type Json = Schema.Json

const pairs = (headers: unknown) =>
  Object.entries((headers ?? {}) as Record<string, unknown>).map(([name, value]) => ({
    name,
    value: String(value)
  }))

const query = (url: string) => {
  try {
    return [...new URL(url).searchParams.entries()].map(([name, value]) => ({ name, value }))
  } catch {
    return []
  }
}

/** HAR wants HTTP/1.1-style names; Chromium says `h2`, `http/1.1`, `h3`. */
const httpVersion = (protocol: unknown) =>
  typeof protocol !== "string" || protocol === ""
    ? ""
    : protocol === "h2"
      ? "HTTP/2.0"
      : protocol === "h3"
        ? "HTTP/3"
        : protocol.toUpperCase()

const header = (headers: unknown, name: string) => {
  const found = Object.entries((headers ?? {}) as Record<string, unknown>).find(
    ([key]) => key.toLowerCase() === name
  )
  return found === undefined ? "" : String(found[1])
}

const phase = (value: unknown, atLeast: number) =>
  typeof value === "number" && value >= atLeast ? value : atLeast

/** One `request` event as a HAR entry. */
const entry = (event: LogEvent): Json => {
  const d = event.data as Record<string, any>
  const timing = (d.timing ?? {}) as Record<string, number>
  const timings = {
    blocked: phase(timing.blocked, -1),
    dns: phase(timing.dns, -1),
    connect: phase(timing.connect, -1),
    ssl: phase(timing.ssl, -1),
    send: phase(timing.send, 0),
    wait: phase(timing.wait, 0),
    receive: phase(timing.receive, 0)
  }
  const time = [timings.blocked, timings.dns, timings.connect, timings.send, timings.wait, timings.receive]
    .filter((ms) => ms > 0)
    .reduce((sum, ms) => sum + ms, 0)
  const bytes = typeof d.bytes === "number" ? d.bytes : 0
  const status = typeof d.status === "number" ? d.status : 0
  return {
    startedDateTime: d.started_at ?? event.at,
    time: Math.max(time, typeof d.duration_ms === "number" ? d.duration_ms : 0),
    request: {
      method: d.method ?? "GET",
      url: d.url ?? "",
      httpVersion: httpVersion(d.protocol),
      cookies: [],
      headers: pairs(d.request_headers),
      queryString: query(d.url ?? ""),
      headersSize: -1,
      bodySize: typeof d.post_data_bytes === "number" ? d.post_data_bytes : 0
    },
    response: {
      status,
      statusText: d.status_text ?? "",
      httpVersion: httpVersion(d.protocol),
      cookies: [],
      headers: pairs(d.response_headers),
      content: { size: bytes, mimeType: d.mime_type ?? "x-unknown" },
      redirectURL: header(d.response_headers, "location"),
      headersSize: -1,
      bodySize: -1,
      _transferSize: bytes
    },
    cache: {},
    timings,
    ...(typeof d.remote_address === "string"
      ? { serverIPAddress: d.remote_address.replace(/:\d+$/, "") }
      : {}),
    connection: typeof d.remote_address === "string" ? d.remote_address : "",
    _resourceType: d.resource_type ?? "other",
    _targetId: d.target_id ?? "",
    ...(d.failure === null || d.failure === undefined ? {} : { _error: d.failure }),
    ...(d.refused_by_proxy === null || d.refused_by_proxy === undefined
      ? {}
      : { _refusedByProxy: d.refused_by_proxy })
  }
}

/** The HAR of `events` (a session's `request` events, in order). */
export const toHar = (events: ReadonlyArray<LogEvent>, creatorVersion: string, comment: string): Json => ({
  log: {
    version: "1.2",
    creator: { name: "remote-browser-service", version: creatorVersion },
    pages: [],
    entries: events.filter((event) => event.kind === "request").map(entry),
    comment
  }
})
