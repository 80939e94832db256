import { SandboxResourcesRequest } from "../../kernel/SandboxResources.ts"
import { Effect, Option, Schedule, Schema } from "effect"
import type { PageAction } from "../../runtime/Drive.ts"
import { CreateSessionRequest, ListSessionsRequest } from "../../kernel/Session.ts"
import { ComputerRequest } from "../../kernel/Computer.ts"
import { decodeInput } from "../../kernel/Validation.ts"
import {
  define,
  described,
  SessionId,
  type ToolAnswer,
  type Route,
  type ToolDef,
  type ToolIo
} from "./McpTool.ts"
import { WORK_TOOLS } from "./McpWorkTools.ts"

export type { ToolAnswer, ToolDef, ToolIo } from "./McpTool.ts"

/**
 * The MCP tools: each is one REST route of the service (or, for the page
 * actions, the CDP connect's access): it takes the route's access, audit and
 * rate limit (`McpCall`), decodes its input as the route does, and calls the
 * use case the route's handler calls; billing and the use case's errors are
 * the route's. A tool adds only its input's shape and the rendering of the answer.
 */

const decodeCreate = decodeInput(CreateSessionRequest)
const decodeList = decodeInput(ListSessionsRequest)

/** A session tool's route parameter. */
const sessionParam = (input: { readonly session_id: string }) => ({ id: input.session_id })

const sessionOnly = Schema.Struct({ session_id: SessionId })

const GET_SESSION = ["GET", "/v1/sessions/{id}"] as const satisfies Route

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
    params: sessionParam,
    checksText: false,
    readOnly,
    run: (input, io) =>
      Effect.map(io.sessions.drive(io.owner, input.session_id, action(input)), (value) => ({
        _tag: "Record" as const,
        record: asRecord(value)
      }))
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
      ),
      resources: Schema.optionalKey(
        described(
          SandboxResourcesRequest,
          "A sandbox's `cpus`, `memory_mb`, `disk_mb` and `pids`, each optional (the node's default), within the operator's maxima. Not for a browser."
        )
      )
    }),
    route: ["POST", "/v1/sessions"],
    run: (input, io) =>
      Effect.gen(function* () {
        const created = yield* io.sessions.createIdempotent(io.owner, yield* decodeCreate(input))
        return yield* waitReady(io, created.session.id, yield* io.record(created.session))
      })
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
    // The route's query has `limit` and `cursor`: `status` and `starting_after` change nothing.
    run: (input, io) =>
      Effect.gen(function* () {
        const query = yield* decodeList(input.limit === undefined ? {} : { limit: input.limit })
        return yield* io.record(yield* io.sessions.list(io.owner, query))
      })
  }),
  define({
    name: "sessions_get",
    title: "Get a session",
    description: "One session's record: status, type, CDP address, egress and cost so far.",
    input: sessionOnly,
    route: GET_SESSION,
    params: sessionParam,
    readOnly: true,
    run: (input, io) =>
      Effect.flatMap(io.sessions.get(io.owner, input.session_id), (session) => io.record(session))
  }),
  define({
    name: "sessions_close",
    title: "Close a session",
    description: "Ends a session: its browser or sandbox is stopped and its egress billed.",
    input: sessionOnly,
    route: ["DELETE", "/v1/sessions/{id}"],
    params: sessionParam,
    destructive: true,
    run: (input, io) =>
      Effect.as(io.sessions.close(io.owner, input.session_id), {
        _tag: "Record" as const,
        record: { session_id: input.session_id, closed: true }
      })
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
    params: sessionParam,
    readOnly: true,
    run: (input, io) =>
      Effect.map(io.sessions.screenshot(io.owner, input.session_id), (png): ToolAnswer => ({
        _tag: "Record",
        record: { session_id: input.session_id, mime_type: "image/png", bytes: png.byteLength },
        images: [{ data: png, mimeType: "image/png" }]
      }))
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
  define({
    name: "browser_computer",
    title: "Computer use",
    description:
      "Drives a browser session's page in front by viewport coordinates and keys, as computer-use agents drive a screen: `actions` (click, double_click, right_click, move, mouse_down, mouse_up, drag, scroll, type, key, wait, screenshot, cursor_position), done in order as a person's mouse and keyboard would. Answers what each did, the pointer and the viewport, and with `screenshot: true` (or a screenshot action) the screen as image content, with the `scale` of its pixels to the viewport's. The same as POST /v1/sessions/{id}/computer, limited like it.",
    input: Schema.Struct({ session_id: SessionId, ...ComputerRequest.fields }),
    route: ["POST", "/v1/sessions/{id}/computer"],
    params: sessionParam,
    run: (input, io) =>
      Effect.map(io.sessions.computer(io.owner, input.session_id, input), (answer): ToolAnswer => {
        const { screenshot, ...rest } = answer
        if (screenshot === null) return { _tag: "Record", record: { ...rest, screenshot: null } }
        const { data, ...shot } = screenshot
        return {
          _tag: "Record",
          record: { ...rest, screenshot: shot },
          images: [{ data: Buffer.from(data, "base64"), mimeType: "image/png" }]
        }
      })
  }),
  ...WORK_TOOLS
]

/** How long `sessions_create` waits for the session to be ready before answering with it as it is. */
const READY_WAIT_MS = 60_000

/**
 * The created session (`created`, its create's answer) once it has left
 * `creating`, read as its GET route answers it: an agent's next call wants it
 * ready. A key that may create but not read sessions gets the create's own answer.
 */
const waitReady = (io: ToolIo, id: string, created: ToolAnswer) =>
  Effect.gen(function* () {
    if (!(yield* io.may(GET_SESSION))) return created
    const left = yield* io.sessions.get(io.owner, id).pipe(
      Effect.repeat({
        until: (session) => session.status !== "creating",
        schedule: Schedule.spaced("50 millis")
      }),
      Effect.timeoutOption(READY_WAIT_MS)
    )
    const session = Option.isSome(left) ? left.value : yield* io.sessions.get(io.owner, id)
    return yield* io.record(session, GET_SESSION)
  })

const asRecord = (value: unknown): Record<string, unknown> =>
  value !== null && typeof value === "object" && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : { value }
