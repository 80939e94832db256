/**
 * OpenAPI for the routes served outside the HttpApi (raw router routes): the
 * CDP WebSocket relay and Prometheus metrics. Added to the generated document
 * so it describes every route the service answers.
 */
const errorRef = (code: string, message: string) => ({
  description: `${code}`,
  content: {
    "application/json": {
      schema: {
        type: "object",
        required: ["error"],
        properties: {
          error: {
            type: "object",
            required: ["code", "message"],
            properties: {
              code: { type: "string", enum: [code] },
              message: { type: "string", examples: [message] }
            }
          }
        }
      }
    }
  }
})

export const rawRoutes = {
  "/sessions/{id}": {
    get: {
      tags: ["Sessions"],
      operationId: "cdp.connect",
      summary: "CDP WebSocket of a session (the session's `cdp_url`)",
      description:
        "A WebSocket upgrade to the session's browser, speaking the Chrome DevTools Protocol (puppeteer `connect({ browserWSEndpoint, headers })`, playwright `connectOverCDP(url, { headers })`). Authenticate with `Authorization: Bearer <API key or access token>`, or `?token=<...>` for clients that cannot set headers; requires `sessions.write` (a scoped key without it is 403) and acts on the key's account (or, for an access token, the one `X-Service-Account` picks). Answers 401/403/404/409 before upgrading; a connect made while the session is `creating` waits (up to 30 s) for `ready`. Frames are relayed in order both ways; each open connection is one `active_connection_leases`. `Browser.close` is answered as done and ends only that connection; navigations to `chrome://`, `devtools://`, `file://` and other browser-internal URLs are answered as `net::ERR_BLOCKED_BY_CLIENT`. When the session ends the client gets close code 1000 with the reason (`session ended: client_delete`).",
      parameters: [
        { name: "id", in: "path", required: true, schema: { type: "string" } },
        {
          name: "token",
          in: "query",
          required: false,
          schema: { type: "string" },
          description: "The API key, instead of the Authorization header."
        }
      ],
      security: [{ bearer: [] }],
      "x-required-access": { permission: "sessions.write", credentials: "any" },
      responses: {
        "101": { description: "Switching Protocols: the CDP WebSocket is open." },
        "400": errorRef("invalid_request", "Request body is malformed."),
        "401": errorRef("unauthorized", "Missing or invalid API key."),
        "403": errorRef("forbidden", "Access denied."),
        "404": errorRef("session_not_found", "Session not found."),
        "409": errorRef("session_not_open", "Session is already in a terminal state."),
        "503": errorRef("service_unavailable", "Service temporarily unavailable.")
      }
    }
  },
  "/metrics": {
    get: {
      tags: ["System"],
      operationId: "system.metrics",
      summary: "Prometheus metrics",
      description:
        "Prometheus text format: sessions by status, the browser pool, create-to-ready latency, sessions ended by reason, egress bytes by region and direction, egress requests refused by reason, ledger credits and debits in micro-USD, and limit rejections by limit.",
      responses: {
        "200": { description: "Metrics", content: { "text/plain": { schema: { type: "string" } } } }
      }
    }
  }
} as const

/** Adds `rawRoutes` to a generated OpenAPI document. */
export const addRawRoutes = (spec: Record<string, any>): Record<string, any> => ({
  ...spec,
  paths: { ...spec.paths, ...rawRoutes }
})
