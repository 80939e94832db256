import type { HttpError } from "../../kernel/ApiError.ts"
import {
  ConnectionLimitReached,
  Forbidden,
  InvalidField,
  InvalidPreviewToken,
  InvalidRequest,
  RateLimited,
  RouteNotFound,
  ServiceUnavailable,
  SessionNotFound,
  SessionNotOpen,
  SessionTypeMismatch,
  TargetNotFound,
  Unauthorized,
  ViewerLimitReached
} from "../../kernel/Errors.ts"
import { AccountNotFound } from "../../kernel/IdentityErrors.ts"
import { PortNotListening, ProcessLimitReached } from "../../kernel/SandboxErrors.ts"
import {
  type Access,
  access,
  audits,
  type RouteAccess,
  routeTable as apiRouteTable
} from "../../features/policy/Access.ts"
import type { RouteLimit } from "./Policy.ts"

/**
 * A route served outside the HttpApi (a raw router route: a WebSocket
 * upgrade, the gateway, MCP, the dashboard, metrics): what it requires, the
 * rate limit it spends and the errors it answers with, declared once. Its
 * handler checks `access` (`authorizeRaw`; `cdpCaller` for a CDP route,
 * `authorizeBearer` for a gateway's own origin) and spends `limit`
 * (`Policy.spend`) from here, and its OpenAPI entry is generated from the
 * same declaration.
 */
export interface RawRoute {
  readonly method: "GET" | "POST" | "DELETE"
  /** As the route table writes it; a trailing `*` is the rest of the path (`{path}` in the document). */
  readonly path: string
  /** What it requires; none for a route that takes no credential, or a token of its own (the live view's). */
  readonly access?: Access
  readonly limit?: RouteLimit
  /** The errors it answers with in the API's error shape, as its handler fails with them. */
  readonly errors: ReadonlyArray<HttpError>
  /** Whether the route table lists it (the scope tests walk it). */
  readonly listed: boolean
}

const route = <const R extends RawRoute>(declared: R): R => declared

const NO_CDP = new SessionTypeMismatch({
  detail: "This is a sandbox session: it has no CDP endpoint (use exec, the PTY or the gateway)."
})

/** What DevTools discovery answers with: the CDP connect's refusals, but for what only a connection meets. */
const DISCOVERY_ERRORS = [
  new Unauthorized(),
  new Forbidden(),
  new SessionNotFound(),
  new AccountNotFound(),
  new SessionNotOpen(),
  NO_CDP,
  new ServiceUnavailable()
]

/** DevTools discovery over HTTP: a trailing slash is the same route (`/json/version/`, as playwright asks). */
const discovery = (path: string) =>
  route({ method: "GET", path, access: access("sessions.write"), errors: DISCOVERY_ERRORS, listed: true })

export const RAW = {
  cdp: route({
    method: "GET",
    path: "/sessions/{id}",
    access: access("sessions.write"),
    errors: [
      new InvalidRequest(),
      new Unauthorized(),
      new Forbidden(),
      new SessionNotFound(),
      new AccountNotFound(),
      new SessionNotOpen(),
      NO_CDP,
      new ConnectionLimitReached({ of: "session" }),
      new ServiceUnavailable()
    ],
    listed: true
  }),
  cdpVersion: discovery("/sessions/{id}/json/version"),
  cdpList: discovery("/sessions/{id}/json/list"),
  cdpJson: discovery("/sessions/{id}/json"),
  // One page target of the session, as Chromium's `/devtools/page/{id}`: the pages `/json/list` names.
  cdpPage: route({
    method: "GET",
    path: "/sessions/{id}/devtools/page/{target_id}",
    access: access("sessions.write"),
    errors: [
      new InvalidRequest(),
      new Unauthorized(),
      new Forbidden(),
      new SessionNotFound(),
      new TargetNotFound(),
      new AccountNotFound(),
      new SessionNotOpen(),
      NO_CDP,
      new ConnectionLimitReached({ of: "session" }),
      new ServiceUnavailable()
    ],
    listed: true
  }),
  // A WebSocket upgrade that starts a shell: audited as the mutation it is.
  pty: route({
    method: "GET",
    path: "/v1/sessions/{id}/pty",
    access: access("exec.write", "any", audits("pty.opened", "session", "id")),
    limit: { name: "exec", per: "principal" },
    errors: [
      new InvalidField({ field: "cols" }),
      new Unauthorized(),
      new Forbidden(),
      new SessionNotFound(),
      new AccountNotFound(),
      new SessionTypeMismatch({
        detail: "This is a browser session: a PTY is for sandbox sessions only (drive a browser over CDP)."
      }),
      new SessionNotOpen(),
      new ProcessLimitReached(),
      new ConnectionLimitReached({ of: "session" }),
      new RateLimited({}),
      new ServiceUnavailable()
    ],
    listed: true
  }),
  // Every method, to a program in the sandbox (listed once, as GET).
  gateway: route({
    method: "GET",
    path: "/s/{id}/{port}/*",
    access: access("sessions.read"),
    errors: [
      new InvalidField({ field: "port" }),
      new Unauthorized(),
      new Forbidden(),
      new SessionNotFound(),
      new AccountNotFound(),
      new SessionNotOpen(),
      new ConnectionLimitReached({ of: "session" }),
      new PortNotListening()
    ],
    listed: true
  }),
  liveView: route({
    method: "GET",
    path: "/sessions/{id}/preview",
    errors: [
      new InvalidRequest(),
      new InvalidPreviewToken(),
      new SessionNotFound(),
      new SessionNotOpen(),
      new ViewerLimitReached(),
      new ConnectionLimitReached({ of: "account" })
    ],
    listed: false
  }),
  dashboard: route({ method: "GET", path: "/", errors: [new ServiceUnavailable()], listed: false }),
  asset: route({ method: "GET", path: "/assets/{name}", errors: [new RouteNotFound()], listed: false }),
  // The MCP endpoint: any member; each tool requires its route's access (`edge/mcp/McpCall.ts`).
  mcp: route({
    method: "POST",
    path: "/v1/mcp",
    access: access(null),
    limit: { name: "mcp", per: "principal" },
    errors: [new Unauthorized(), new Forbidden(), new RateLimited({})],
    listed: true
  }),
  mcpEnd: route({
    method: "DELETE",
    path: "/v1/mcp",
    access: access(null),
    errors: [new Unauthorized()],
    listed: false
  }),
  metrics: route({ method: "GET", path: "/metrics", errors: [], listed: false })
} as const

/** The raw routes the route table lists, with what they require. */
export const RAW_ROUTES: ReadonlyArray<RouteAccess> = Object.values(RAW).flatMap((raw) =>
  raw.listed && "access" in raw ? [{ method: raw.method, path: raw.path, access: raw.access }] : []
)

/** Every route behind the access rules, the HttpApi's and the raw ones (docs/reference/access.md). */
export const routeTable: typeof apiRouteTable = (api) => [...apiRouteTable(api), ...RAW_ROUTES]

type Operation = Record<string, any>

/** What every DevTools discovery route says of its access. */
const DISCOVERY_ACCESS =
  "Authenticated as the CDP connect (`GET /sessions/{id}`): `Authorization: Bearer <API key or access token>`, or `?token=<...>` for clients that cannot set headers (the URLs in the answer then carry `?token=<connect token>`: never the key, but a signed token (`rbs_cdp_...`) that opens only this session's CDP routes (the relay, its page relays, discovery), acting in the caller's account as its key stands at each use (a revoke ends them at once), for 15 minutes; such a client connects with them as they are; with the header they carry no credential); requires `sessions.write`; `X-Service-Account` picks the account for an access token. Refused in the API's error shape: 401, 403, 404, 409 `session_not_open` once the session ended, 409 `session_type_mismatch` for a sandbox session. A request made while the session is `creating` waits (up to 30 s) for `ready`. Works through any node. Chromium's other endpoints (`/json/protocol`, `/json/new`, `/json/activate`, `/json/close`) are not served: chrome-remote-interface takes `local: true` for its own copy of the protocol."

const DISCOVERY_LIST =
  "The session's page targets as Chromium's `/json/list` lists them, most recently active first: `description`, `id`, `title`, `type` (`page`), `url` and `webSocketDebuggerUrl`, `{cdp_url}/devtools/page/{id}`, the page relay (never the browser's own address); no `devtoolsFrontendUrl` (the DevTools front end could not authenticate). For a context session, the pages of its own browser context alone. `/sessions/{id}/json` and `/sessions/{id}/json/list` are the same list, with or without a trailing slash. "

const DISCOVERY_PARAMETERS = [
  { name: "id", in: "path", required: true, schema: { type: "string" } },
  {
    name: "token",
    in: "query",
    required: false,
    schema: { type: "string" },
    description: "The API key, instead of the Authorization header."
  }
]

const DISCOVERY_LIST_RESPONSE = {
  description: "The session's pages, as Chromium's `/json/list` lists them",
  content: {
    "application/json": {
      schema: {
        type: "array",
        items: {
          type: "object",
          required: ["description", "id", "title", "type", "url", "webSocketDebuggerUrl"],
          properties: {
            description: { type: "string" },
            id: { type: "string", description: "The page's target id." },
            title: { type: "string" },
            type: { type: "string", enum: ["page"] },
            url: { type: "string" },
            webSocketDebuggerUrl: {
              type: "string",
              description:
                "The page relay, `{cdp_url}/devtools/page/{id}` (with a connect token as `?token=`, when the request came with one)."
            }
          }
        }
      }
    }
  }
}

/** Each raw route's operation as prose: what the declarations in `RAW` do not say. */
const operations: Record<string, Record<string, Operation>> = {
  "/sessions/{id}": {
    get: {
      tags: ["Sessions"],
      operationId: "cdp.connect",
      summary: "CDP WebSocket of a session (the session's `cdp_url`)",
      description:
        "A WebSocket upgrade to the session's browser, speaking the Chrome DevTools Protocol (puppeteer `connect({ browserWSEndpoint, headers })`, playwright `connectOverCDP(url, { headers })`). Authenticate with `Authorization: Bearer <API key or access token>`, or `?token=<...>` for clients that cannot set headers (a key, an access token, or a connect token of this session from DevTools discovery); requires `sessions.write` (a scoped key without it is 403) and acts on the key's account (or, for an access token, the one `X-Service-Account` picks). Answers 401/403/404/409 before upgrading; a connect made while the session is `creating` waits (up to 30 s) for `ready`. Frames are relayed in order both ways; each open connection is one `active_connection_leases`. `Browser.close` is answered as done and ends only that connection; navigations to `chrome://`, `devtools://`, `file://` and other browser-internal URLs are answered as `net::ERR_BLOCKED_BY_CLIENT`. When the session ends the client gets close code 1000 with the reason (`session ended: client_delete`). Clients that start from an HTTP URL find it through DevTools discovery, `GET /sessions/{id}/json/version`.",
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
      responses: {
        "101": { description: "Switching Protocols: the CDP WebSocket is open." }
      }
    }
  },
  "/sessions/{id}/json/version": {
    get: {
      tags: ["Sessions"],
      operationId: "cdp.version",
      summary: "DevTools discovery: the session's browser (Chromium's `/json/version`)",
      description:
        "For CDP clients that start from an HTTP URL: playwright `chromium.connectOverCDP('http://<host>/sessions/{id}', { headers })`, chrome-remote-interface (`alterPath`). Answers as Chromium's own `/json/version`, with what the live browser says of itself (`Browser.getVersion`): `Browser`, `Protocol-Version`, `User-Agent`, `V8-Version`, `WebKit-Version`, and `webSocketDebuggerUrl`, which is the session's `cdp_url` (the relay, never the browser's own address). A trailing slash is the same route (`/json/version/`, which playwright asks for). " +
        DISCOVERY_ACCESS,
      parameters: DISCOVERY_PARAMETERS,
      security: [{ bearer: [] }],
      responses: {
        "200": {
          description: "The browser, as Chromium's `/json/version` describes it",
          content: {
            "application/json": {
              schema: {
                type: "object",
                required: [
                  "Browser",
                  "Protocol-Version",
                  "User-Agent",
                  "V8-Version",
                  "WebKit-Version",
                  "webSocketDebuggerUrl"
                ],
                properties: {
                  Browser: { type: "string", examples: ["Chrome/156.0.8078.114"] },
                  "Protocol-Version": { type: "string", examples: ["1.3"] },
                  "User-Agent": { type: "string" },
                  "V8-Version": { type: "string" },
                  "WebKit-Version": {
                    type: "string",
                    examples: ["537.36 (@ea19f9737303a76e07b53c6a1eec43355aca3b1d)"]
                  },
                  webSocketDebuggerUrl: {
                    type: "string",
                    description:
                      "The session's `cdp_url` (with a connect token as `?token=`, when the request came with one)."
                  }
                }
              }
            }
          }
        }
      }
    }
  },
  "/sessions/{id}/json/list": {
    get: {
      tags: ["Sessions"],
      operationId: "cdp.list",
      summary: "DevTools discovery: the session's pages (Chromium's `/json/list`)",
      description: DISCOVERY_LIST + DISCOVERY_ACCESS,
      parameters: DISCOVERY_PARAMETERS,
      security: [{ bearer: [] }],
      responses: { "200": DISCOVERY_LIST_RESPONSE }
    }
  },
  "/sessions/{id}/json": {
    get: {
      tags: ["Sessions"],
      operationId: "cdp.json",
      summary: "DevTools discovery: the session's pages (Chromium's `/json`, as `/json/list`)",
      description: DISCOVERY_LIST + DISCOVERY_ACCESS,
      parameters: DISCOVERY_PARAMETERS,
      security: [{ bearer: [] }],
      responses: { "200": DISCOVERY_LIST_RESPONSE }
    }
  },
  "/sessions/{id}/devtools/page/{target_id}": {
    get: {
      tags: ["Sessions"],
      operationId: "cdp.page",
      summary: "CDP WebSocket of one page of a session (a page's `webSocketDebuggerUrl`)",
      description:
        "A WebSocket upgrade to one page target of the session, as Chromium's own `/devtools/page/{target_id}` serves it (chrome-remote-interface connects to the first page's by default): a command without `sessionId` is the page's, and the page's events and answers come without one. Authenticated, refused and counted as the CDP connect (`GET /sessions/{id}`: the same credentials, `sessions.write`, one `active_connection_leases`, the same close frames when the session ends); 404 `target_not_found` before upgrading for a target that is not one of the session's pages (of its own browser context, for a context session), as `/json/list` lists them. The relay attaches to the page over a connection of its own to the browser, so the page's client is held to everything the CDP connect's is: the same guard (`file://` and `chrome://` navigations answered `net::ERR_BLOCKED_BY_CLIENT`, `Browser.close` ending only the connection) and, for a context session, its context alone. Closed with 1000 `the page was closed` when the page goes.",
      parameters: [
        { name: "id", in: "path", required: true, schema: { type: "string" } },
        { name: "target_id", in: "path", required: true, schema: { type: "string" } },
        {
          name: "token",
          in: "query",
          required: false,
          schema: { type: "string" },
          description: "The API key, instead of the Authorization header."
        }
      ],
      security: [{ bearer: [] }],
      responses: {
        "101": { description: "Switching Protocols: the page's CDP WebSocket is open." }
      }
    }
  },
  "/v1/sessions/{id}/pty": {
    get: {
      tags: ["Sandbox"],
      operationId: "sandbox.pty",
      summary: "An interactive shell of a sandbox session (WebSocket)",
      description:
        "A WebSocket upgrade to a login shell (bash where the image has it, else sh) in a real PTY inside the sandbox, started in `/root`. Authenticate like the CDP relay: `Authorization: Bearer <API key or access token>`, `?token=` for clients that cannot set headers, or the dashboard cookie from this service's own pages (`Origin` checked; `?account=` names the active account, as `X-Service-Account` does). Requires `exec.write`; counts against `LIMIT_EXEC_PER_MINUTE` (per principal, with the `X-RateLimit-*` headers) and is audited as `pty.opened`, a refused open too (outcome `failure`, with its code). Works through any node. Several PTYs of one session may be open at once; each is one `active_connection_leases`.\n\n" +
        '**Server to client.** First a JSON text message `{"type":"hello","pty":"pty_...","cols","rows"}`, then the terminal\'s output as binary messages (bytes as the program wrote them, escape sequences included). When the shell exits: a text message `{"type":"exit","exit_code","signal"}` and close 1000 `exited`. When the session ends: close 1000 `session ended: <ended_reason>`.\n\n' +
        "**Client to server.** Keystrokes as binary or text messages, written to the terminal as they are (`\\r` for Enter, `\\u0003` for Ctrl-C). Closing the socket ends the shell and everything it started. Resize with `POST /v1/sessions/{id}/resize` (every open PTY of the session, and the size of the next).\n\n" +
        "A client that reads slowly holds the shell back (its output stops being read past 4 MiB queued) rather than losing output.",
      parameters: [
        { name: "id", in: "path", required: true, schema: { type: "string" } },
        {
          name: "cols",
          in: "query",
          required: false,
          schema: { type: "integer", minimum: 1, maximum: 1000 },
          description: "Columns (default: the session's last resize, else 80)."
        },
        {
          name: "rows",
          in: "query",
          required: false,
          schema: { type: "integer", minimum: 1, maximum: 500 },
          description: "Rows (default: the session's last resize, else 24)."
        },
        {
          name: "token",
          in: "query",
          required: false,
          schema: { type: "string" },
          description: "The API key or access token, instead of the Authorization header."
        },
        {
          name: "account",
          in: "query",
          required: false,
          schema: { type: "string" },
          description: "The active account (as `X-Service-Account`), for clients that cannot set headers."
        }
      ],
      security: [{ bearer: [] }],
      responses: {
        "101": { description: "Switching Protocols: the terminal is open." }
      }
    }
  },
  "/s/{id}/{port}/{path}": {
    get: {
      tags: ["Sandbox"],
      operationId: "sandbox.gateway",
      summary: "The session gateway: a port of a sandbox over HTTP and WebSocket",
      description:
        "`{PUBLIC_URL}/s/{id}/{port}/{path}` proxies any method (and WebSocket upgrades) to `127.0.0.1:{port}` inside the sandbox: a dev server started with `exec` in the background, opened in a browser. `/s/{id}/{port}` redirects (308) to `/s/{id}/{port}/` so relative links resolve under it. The program sees its own path (`/{path}`), its own cookies and headers, `Host: 127.0.0.1:{port}`; never the service's cookies or credentials.\n\n" +
        "Authenticated by `Authorization: Bearer` (key or access token: `sessions.read` for GET and HEAD, `sessions.write` for any other method and for a WebSocket, 403 `forbidden` otherwise), `?token=`, the dashboard cookie, or a signed link (`?rbs_token=` from `POST /v1/sessions/{id}/gateway-token`, which writes only if whoever minted it held `sessions.write`, and the first GET turns into a cookie scoped to `/s/{id}/` and redirects (303) without it). Responses carry `Content-Security-Policy: sandbox` (the page runs in an opaque origin: it cannot read the service's cookies or call its API as the visitor), and the program's cookies are confined to its path. Bytes both ways count as the session's egress. Works through any node. With `GATEWAY_DOMAIN` set, the same port is also served at its own origin, `<port>-<id>.<GATEWAY_DOMAIN>` (and `<id>.<GATEWAY_DOMAIN>` for port 3000), on any path, without `Content-Security-Policy` (Bearer or a signed link only).",
      parameters: [
        { name: "id", in: "path", required: true, schema: { type: "string" } },
        { name: "port", in: "path", required: true, schema: { type: "integer", minimum: 1, maximum: 65535 } },
        {
          name: "path",
          in: "path",
          required: true,
          schema: { type: "string" },
          description: "The rest of the program's path."
        },
        {
          name: "rbs_token",
          in: "query",
          required: false,
          schema: { type: "string" },
          description: "A signed gateway link's token."
        }
      ],
      security: [{ bearer: [] }],
      responses: {
        "200": { description: "The program's answer, as it gave it (any status)." },
        "303": { description: "A signed link: its token is now a cookie of the session's gateway path." }
      }
    }
  },
  "/sessions/{id}/preview": {
    get: {
      tags: ["Sessions"],
      operationId: "liveview.stream",
      summary: "Live-view stream of a session (a preview token's `url`)",
      description:
        "A WebSocket upgrade, opened with the `url` that `POST /v1/sessions/{id}/preview-token` answers (`?token=` is the preview token: signed, valid 10 minutes by default and never past the session's TTL, bound to this session and its account; no other credential). Refused before upgrading: 401 `unauthorized` for a missing, invalid or expired token or one for another session, 404 `session_not_found`, 409 `session_not_open` once the session ended, 429 `viewer_limit` beyond `LIMIT_VIEWERS_PER_SESSION` viewers (default 10). Works through any node.\n\n" +
        '**Server to viewer.** First a JSON text message `{"type":"hello","session_id","input_enabled","fps":5,"expires_at"}`, then the session\'s pages, `{"type":"tabs","tabs":[{"id","url","title","active"}]}` (oldest first; `id` is the page\'s DevTools target id, `active` the page on screen; a context session lists its own context\'s pages only), sent again whenever a page opens, closes, navigates, changes its title (within a second or so) or another comes on screen; a viewer that reads slowly gets the newest list. Then each frame as two messages: a JSON text message `{"type":"frame","seq","timestamp" (ms since the epoch, when the browser captured it),"width","height" (the JPEG\'s pixels),"css_width","css_height" (the page\'s viewport in CSS pixels),"url"}`, followed by the JPEG as a binary message. At most 5 frames a second, whatever the page does (the newest frame is kept; a change after a quiet moment is sent at once); frames come only when the page changes, and a new viewer gets the latest frame at once. A viewer that reads slowly skips frames. The screen shows one page for every viewer and the recording: the one the client opened last, or the one a viewer switched to since; when it closes, the newest left. Errors are JSON text messages `{"type":"error","code","message"}` (`invalid_input`, `input_overflow`, `no_page`, `input_disabled`, `unknown_tab`, `copy_failed`); the stream stays open.\n\n' +
        '**Viewer to server** (forwarded to the page on screen when `input_enabled`, else ignored and counted; `input_enabled` is true for a token minted with `sessions.write`): JSON text messages in the page\'s CSS pixels: `{"type":"click","x":200,"y":150,"button"?:"left"|"middle"|"right","click_count"?:1,"modifiers"?:["Shift",...]}`, `{"type":"tap","x","y"}`, `{"type":"scroll","x","y","dx","dy"}`, `{"type":"key","key":"a"}` (a DOM key value: a character, or `Enter`, `Tab`, `Backspace`, `Escape`, `Delete`, `ArrowLeft`, `Home`, `F1`... with optional `modifiers`), `{"type":"key","text":"a whole string"}`. A message over 1 MB closes the stream (1009).\n\n' +
        '**Tabs and clipboard** (with `input_enabled`; a view-only viewer is answered `input_disabled` for each, since it waits on them): `{"type":"switch_tab","id":"<a tabs entry\'s id>"}` puts that page on screen for every viewer and the recording, brings it to front, and sends the input to it (a new `tabs` message says so; a page that is not the session\'s is `unknown_tab`). `{"type":"paste","text":"..."}` (1 to 100,000 characters) types the text into the focused element of the page on screen as one insertion (CDP `Input.insertText`, as a key message\'s `text`). `{"type":"copy"}` is answered `{"type":"clipboard","text","truncated"}`: the selection of the page on screen, that of a focused text field included (never a password field\'s), at most 100,000 characters (`truncated: true` when more was selected); `copy_failed` when the page navigated as it was read.\n\n' +
        "**Close codes.** 1000 `session ended: <ended_reason>`; 4001 `preview token expired: mint a new one to resume`; 1001 the service is stopping; 1011 the browser or the session's node went away.",
      parameters: [
        { name: "id", in: "path", required: true, schema: { type: "string" } },
        {
          name: "token",
          in: "query",
          required: true,
          schema: { type: "string" },
          description: "The preview token (the `url` from `preview-token` carries it)."
        }
      ],
      responses: {
        "101": { description: "Switching Protocols: the stream is open." }
      }
    }
  },
  "/": {
    get: {
      tags: ["Dashboard"],
      operationId: "dashboard.page",
      summary: "The dashboard",
      description:
        "The web dashboard (HTML; built from `web/` by the set-up): log in, keys, sessions with the live view, usage, billing, webhooks, organizations, audit events. Its API calls use the `service_session` cookie. Sent with a strict Content-Security-Policy, `X-Frame-Options: DENY` and `Cache-Control: no-cache`. 503 `service_unavailable` when the dashboard was not built (`npm run build:web`).",
      responses: {
        "200": {
          description: "The dashboard's page",
          content: { "text/html": { schema: { type: "string" } } }
        }
      }
    }
  },
  "/assets/{name}": {
    get: {
      tags: ["Dashboard"],
      operationId: "dashboard.asset",
      summary: "A script, style or image of the dashboard",
      description:
        "A file of the dashboard's build, named after a hash of its content and cached for a year (`immutable`); brotli or gzip when the client accepts them.",
      parameters: [{ name: "name", in: "path", required: true, schema: { type: "string" } }],
      responses: {
        "200": { description: "The file" }
      }
    }
  },
  "/v1/mcp": {
    post: {
      tags: ["MCP"],
      operationId: "mcp.post",
      summary: "The MCP tool endpoint (Streamable HTTP, JSON-RPC 2.0)",
      description:
        "The Model Context Protocol over Streamable HTTP (revisions 2025-11-25, 2025-06-18 and 2025-03-26): `initialize`, `tools/list`, `tools/call`, `ping` and notifications, one JSON-RPC message per POST (a notification is answered 202). `initialize` answers with an `Mcp-Session-Id` header, which the client sends with each later request (404 once the session is unknown: initialize again). Authentication and account selection as every `/v1` route (`Authorization: Bearer`, `X-Service-Account`; 401, 403 and 404 `account_not_found` in the API's error shape). Each POST spends the endpoint's own limit per principal (`LIMIT_MCP_REQUESTS_PER_MINUTE`, default 600) with the `X-RateLimit-*` headers, 429 `rate_limited` with `Retry-After` beyond. Tools: `sessions_create`, `sessions_list`, `sessions_get`, `sessions_close`, `browser_navigate`, `browser_screenshot`, `browser_text`, `browser_click`, `browser_type`, `browser_evaluate`, `sandbox_exec`, `files_read`, `files_write`, `workspaces_list`, `workspaces_create`, `workspaces_snapshot`, `jobs_create`, `jobs_get`; each is one REST route called as the caller (its scopes, rate limits, audit and billing apply; `tools/list` shows only the tools the caller may call). A tool's answer is its record as JSON text plus `structuredContent` (a screenshot also as image content); a refusal is a result with `isError: true` and `{ error: { code, message } }`. Malformed JSON is a JSON-RPC `-32700` parse error, an unknown method `-32601`, an unknown tool or invalid arguments `-32602`. `notifications/cancelled` stops the session's call of that id. Everything the transport refuses is a JSON-RPC error: `-32001` for an unknown session (404), `-32600` for a request it cannot take (400), `-32000` for an `Origin` (403), an `Accept` without both JSON and event streams (406) or another media type (415). Batches only in a 2025-03-26 session.",
      security: [{ bearer: [] }],
      parameters: [
        { name: "Mcp-Session-Id", in: "header", required: false, schema: { type: "string" } },
        { name: "MCP-Protocol-Version", in: "header", required: false, schema: { type: "string" } }
      ],
      requestBody: {
        required: true,
        content: {
          "application/json": { schema: { type: "object", description: "A JSON-RPC 2.0 message." } }
        }
      },
      responses: {
        "200": {
          description:
            "The JSON-RPC response as JSON; an empty event stream for a call cancelled by `notifications/cancelled`",
          content: { "application/json": { schema: { type: "object" } }, "text/event-stream": {} }
        },
        "202": { description: "A notification or response was accepted." },
        "400": {
          description:
            "A JSON-RPC error: a missing session, a header or protocol version the endpoint does not accept, a batch outside a 2025-03-26 session."
        },
        "403": {
          description: "A request carrying `Origin` (JSON-RPC `-32000`), or the caller's access refused."
        },
        "404": { description: "The `Mcp-Session-Id` is unknown (JSON-RPC `-32001`: initialize again)." },
        "406": { description: "The `Accept` header takes no JSON or no event stream (JSON-RPC `-32000`)." }
      }
    },
    delete: {
      tags: ["MCP"],
      operationId: "mcp.delete",
      summary: "End an MCP session",
      description:
        "Ends the MCP session named by `Mcp-Session-Id`; its calls in flight are interrupted and answered 404. Authenticated as the POST.",
      security: [{ bearer: [] }],
      parameters: [{ name: "Mcp-Session-Id", in: "header", required: true, schema: { type: "string" } }],
      responses: {
        "204": { description: "Ended." },
        "400": {
          description: "No `Mcp-Session-Id` header, or an unsupported protocol version (JSON-RPC error)."
        },
        "404": { description: "No such MCP session (JSON-RPC `-32001`)." }
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
}

/** The API's error body of the errors answered with one status: their codes, and their messages as examples. */
const errorResponse = (errors: ReadonlyArray<HttpError>) => {
  const codes = [...new Set(errors.map((error) => error.code))]
  return {
    description: codes.join(", "),
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
                code: { type: "string", enum: codes },
                message: { type: "string", examples: [...new Set(errors.map((error) => error.message))] }
              }
            }
          }
        }
      }
    }
  }
}

/** A raw route's OpenAPI operation: its prose, plus its access, audit action and errors as declared. */
const operationOf = (raw: RawRoute): Operation => {
  const prose = operations[raw.path.replace(/\*$/, "{path}")]?.[raw.method.toLowerCase()]
  // A declared route without its prose is a bug: the document would lose it.
  if (prose === undefined) throw new Error(`no OpenAPI prose for ${raw.method} ${raw.path}`)
  const byStatus = new Map<number, Array<HttpError>>()
  for (const error of raw.errors) byStatus.set(error.status, [...(byStatus.get(error.status) ?? []), error])
  const responses: Record<string, unknown> = { ...prose.responses }
  for (const [status, errors] of byStatus) responses[String(status)] = errorResponse(errors)
  return {
    ...prose,
    ...(raw.access === undefined
      ? {}
      : {
          "x-required-access": { permission: raw.access.permission, credentials: raw.access.credentials },
          ...(raw.access.audit === null ? {} : { "x-audit-action": raw.access.audit.action })
        }),
    responses: Object.fromEntries(Object.entries(responses).sort(([a], [b]) => Number(a) - Number(b)))
  }
}

/** The raw routes' paths in the OpenAPI document. */
export const rawRoutes = (): Record<string, Record<string, Operation>> => {
  const paths: Record<string, Record<string, Operation>> = {}
  for (const raw of Object.values(RAW) as ReadonlyArray<RawRoute>) {
    const path = raw.path.replace(/\*$/, "{path}")
    paths[path] = { ...paths[path], [raw.method.toLowerCase()]: operationOf(raw) }
  }
  return paths
}

/** Adds the raw routes to a generated OpenAPI document. */
export const addRawRoutes = (spec: Record<string, any>): Record<string, any> => ({
  ...spec,
  paths: { ...spec.paths, ...rawRoutes() }
})
