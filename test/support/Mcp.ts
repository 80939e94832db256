import { Effect } from "effect"

/** What a raw POST to `/v1/mcp` answered. */
export interface McpAnswer {
  readonly status: number
  readonly headers: Headers
  readonly text: string
  readonly json: any
}

/** One raw POST to `/v1/mcp` with `key` (JSON in, both media types accepted): its status, headers, body and JSON. */
export const mcpPost = (url: string, key: string, body: string, headers: Record<string, string> = {}) =>
  Effect.promise(async (): Promise<McpAnswer> => {
    const response = await fetch(`${url}/v1/mcp`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${key}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        ...headers
      },
      body
    })
    const text = await response.text()
    let json: any = null
    try {
      json = text === "" ? null : JSON.parse(text)
    } catch {
      // not JSON: an empty-bodied status, say
    }
    return { status: response.status, headers: response.headers, text, json }
  })
