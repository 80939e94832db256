import { Effect } from "effect"

export interface SseEvent {
  readonly id: string
  readonly event: string
  readonly data: string
}

/**
 * Reads a server-sent event stream as a browser's EventSource would parse it,
 * until it ends or `until` is satisfied (then hangs up), within `timeoutMs`.
 */
export const read = (
  url: string,
  key: string,
  options: {
    readonly lastEventId?: string
    readonly until?: (events: ReadonlyArray<SseEvent>) => boolean
    readonly timeoutMs?: number
  }
) =>
  Effect.promise(async () => {
    const controller = new AbortController()
    const timer = setTimeout(() => controller.abort(), options.timeoutMs ?? 20_000)
    const headers: Record<string, string> = { authorization: `Bearer ${key}`, accept: "text/event-stream" }
    if (options.lastEventId !== undefined) headers["last-event-id"] = options.lastEventId
    const response = await fetch(url, { headers, signal: controller.signal })
    const events: Array<SseEvent> = []
    let ended = false
    if (response.body === null) throw new Error(`no body: ${response.status}`)
    const reader = response.body.getReader()
    const decoder = new TextDecoder()
    let buffer = ""
    try {
      while (true) {
        const { value, done } = await reader.read()
        if (done) {
          ended = true
          break
        }
        buffer += decoder.decode(value, { stream: true })
        let split: number
        while ((split = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, split)
          buffer = buffer.slice(split + 2)
          let id = ""
          let event = "message"
          const data: Array<string> = []
          for (const line of block.split("\n")) {
            if (line.startsWith(":")) continue
            const colon = line.indexOf(":")
            const field = colon < 0 ? line : line.slice(0, colon)
            const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "")
            if (field === "id") id = value
            else if (field === "event") event = value
            else if (field === "data") data.push(value)
          }
          if (data.length > 0) events.push({ id, event, data: data.join("\n") })
        }
        if (options.until?.(events) === true) {
          controller.abort()
          break
        }
      }
    } catch (error) {
      if (!controller.signal.aborted) throw error
    } finally {
      clearTimeout(timer)
    }
    return { status: response.status, contentType: response.headers.get("content-type"), events, ended }
  })
