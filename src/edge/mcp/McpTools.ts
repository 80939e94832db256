import { Effect, Schema } from "effect"
import type { PageAction } from "../../runtime/Drive.ts"
import {
  answerOf,
  define,
  described,
  query,
  seg,
  SessionId,
  type ToolAnswer,
  type ToolDef,
  type ToolIo
} from "./McpTool.ts"
import { WORK_TOOLS } from "./McpWorkTools.ts"

export type { ToolAnswer, ToolDef, ToolIo } from "./McpTool.ts"

/**
 * The MCP tools: each is one REST route of the service (or, for the page
 * actions, the CDP connect's access), called in-process as the caller. The
 * route decides: its scopes, rate limit, audit, billing and errors are the
 * tool's. A tool adds only its input's shape and the rendering of the answer.
 */

const sessionOnly = Schema.Struct({ session_id: SessionId })

const GET_SESSION = ["GET", "/v1/sessions/{id}"] as const

const PageUrl = described(
  Schema.String.check(
    Schema.makeFilter((url: string) => /^(https?:\/\/|about:blank$)/i.test(url), {
      expected: "an http(s) URL"
    })
  ),
  "The URL to load: http or https (or about:blank). The session's egress policy applies."
)

const browserTool = (
  name: string,
  title: string,
  description: string,
  fields: Schema.Struct.Fields,
  action: (input: any) => PageAction,
  readOnly = false
) =>
  define({
    name,
    title,
    description: `${description} On a browser session's page in front (its first tab; a blank one is opened when there is none).`,
    input: Schema.Struct({ session_id: SessionId, ...fields }),
    // What a CDP client needs to drive the browser.
    route: ["GET", "/sessions/{id}"],
    readOnly,
    run: (input, io) => io.drive(input.session_id, action(input))
  })

export const TOOLS: ReadonlyArray<ToolDef> = [
  define({
    name: "sessions_create",
    title: "Create a session",
    description:
      "Starts a session: a browser (Chromium, driven with the browser_* tools or over CDP) or a sandbox (a Linux container for sandbox_exec and files_*). Answers with the session record once it is ready. Billed and limited like POST /v1/sessions.",
    input: Schema.Struct({
      session_type: Schema.optionalKey(
        described(Schema.Literals(["browser", "sandbox"]), "`browser` (default) or `sandbox`.")
      ),
      ttl_seconds: Schema.optionalKey(
        described(Schema.Int, "How long the session may live: 60 to 3600 seconds (default 1800).")
      ),
      workspace: Schema.optionalKey(
        described(Schema.String, "A workspace (name or id) to run on: its disk is the profile or home.")
      )
    }),
    route: ["POST", "/v1/sessions"],
    run: (input, io) =>
      Effect.flatMap(io.rest({ method: "POST", path: "/v1/sessions", json: input }), (created) =>
        created.status >= 400 ? Effect.succeed(answerOf(created)) : waitReady(io, answerOf(created))
      )
  }),
  define({
    name: "sessions_list",
    title: "List sessions",
    description: "The account's sessions, newest first (a page of `limit`, 1 to 100).",
    input: Schema.Struct({
      limit: Schema.optionalKey(described(Schema.Int, "Page size, 1 to 100 (default 20).")),
      status: Schema.optionalKey(described(Schema.String, "Only sessions in this status (e.g. `ready`).")),
      starting_after: Schema.optionalKey(described(Schema.String, "The last id of the previous page."))
    }),
    route: ["GET", "/v1/sessions"],
    readOnly: true,
    run: (input, io) =>
      Effect.map(io.rest({ method: "GET", path: `/v1/sessions${query(input)}` }), (answer) =>
        answerOf(answer)
      )
  }),
  define({
    name: "sessions_get",
    title: "Get a session",
    description: "One session's record: status, type, CDP address, egress and cost so far.",
    input: sessionOnly,
    route: ["GET", "/v1/sessions/{id}"],
    readOnly: true,
    instant: true,
    run: (input, io) =>
      io.read(GET_SESSION, input.session_id, ({ owner, sessions }) => sessions.get(owner, input.session_id))
  }),
  define({
    name: "sessions_close",
    title: "Close a session",
    description: "Ends a session: its browser or sandbox is stopped and its egress billed.",
    input: sessionOnly,
    route: ["DELETE", "/v1/sessions/{id}"],
    destructive: true,
    run: (input, io) =>
      Effect.map(io.rest({ method: "DELETE", path: `/v1/sessions/${seg(input.session_id)}` }), (answer) =>
        answerOf(answer, { session_id: input.session_id, closed: true })
      )
  }),
  browserTool(
    "browser_navigate",
    "Load a URL",
    "Loads `url` and waits for its load event (then `wait_ms`); answers with the final URL, the main document's HTTP status and the title.",
    {
      url: PageUrl,
      wait_ms: Schema.optionalKey(described(Schema.Int, "Extra wait after the load event, 0 to 30000 ms."))
    },
    (input) => ({
      _tag: "Navigate",
      url: input.url,
      waitMs: Math.max(0, Math.min(30_000, input.wait_ms ?? 0))
    })
  ),
  define({
    name: "browser_screenshot",
    title: "Screenshot",
    description:
      "A PNG of a browser session's page in front, as image content. Limited like POST /v1/sessions/{id}/screenshot.",
    input: sessionOnly,
    route: ["POST", "/v1/sessions/{id}/screenshot"],
    readOnly: true,
    run: (input, io) =>
      Effect.map(
        io.rest({ method: "POST", path: `/v1/sessions/${seg(input.session_id)}/screenshot` }),
        (answer): ToolAnswer =>
          answer.status >= 400
            ? answerOf(answer)
            : {
                _tag: "Record",
                record: {
                  session_id: input.session_id,
                  mime_type: "image/png",
                  bytes: answer.body.byteLength
                },
                images: [{ data: answer.body, mimeType: "image/png" }]
              }
      )
  }),
  browserTool(
    "browser_text",
    "Read the page's text",
    "The page's visible text (`innerText` of its body, at most 200,000 characters), its URL and title.",
    {},
    () => ({ _tag: "Text" }),
    true
  ),
  browserTool(
    "browser_click",
    "Click",
    "Clicks the centre of the first element matching the CSS `selector`, scrolled into view, as a mouse would.",
    { selector: described(Schema.String, "A CSS selector.") },
    (input) => ({ _tag: "Click", selector: input.selector })
  ),
  browserTool(
    "browser_type",
    "Type",
    "Focuses the first element matching the CSS `selector` and types `text` into it, as a keyboard would.",
    {
      selector: described(Schema.String, "A CSS selector."),
      text: described(Schema.String, "The text to type.")
    },
    (input) => ({ _tag: "Type", selector: input.selector, text: input.text })
  ),
  browserTool(
    "browser_evaluate",
    "Evaluate JavaScript",
    "Evaluates a JavaScript `expression` in the page (a promise is awaited) and answers with its value as JSON.",
    { expression: described(Schema.String, "A JavaScript expression.") },
    (input) => ({ _tag: "Evaluate", expression: input.expression })
  ),
  ...WORK_TOOLS
]

/** How long `sessions_create` waits for the session to be ready before answering with it as it is. */
const READY_WAIT_MS = 60_000

/**
 * Polls the created session (its GET route's record) until it leaves
 * `creating`: an agent's next call wants it ready. A key that may create but
 * not read sessions gets the create's own answer.
 */
const waitReady = (io: ToolIo, created: ToolAnswer): Effect.Effect<ToolAnswer> =>
  Effect.gen(function* () {
    if (created._tag === "Refused") return created
    const id = String(created.record.id)
    const deadline = Date.now() + READY_WAIT_MS
    while (true) {
      const answer = yield* io.read(GET_SESSION, id, ({ owner, sessions }) => sessions.get(owner, id))
      if (answer._tag === "Refused") return answer.status === 403 ? created : answer
      if (answer.record.status !== "creating" || Date.now() > deadline) return answer
      yield* Effect.sleep("50 millis")
    }
  })
