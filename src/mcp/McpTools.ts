import { Effect, Schema } from "effect"
import type { PageAction } from "../browser/PageActions.ts"
import { CommandField } from "../domain/Sandbox.ts"
import { jsonOf, type RestAnswer, type RestRequest } from "./RestCall.ts"

/**
 * The MCP tools: each is one REST route of the service (or, for the page
 * actions, the CDP connect's access), called in-process as the caller. The
 * route decides: its scopes, rate limit, audit, billing and errors are the
 * tool's. A tool adds only its input's shape and the rendering of the answer.
 */

/** What a tool answers: a record (shown as JSON text and `structuredContent`), images beside it. */
export type ToolAnswer =
  | {
      readonly _tag: "Record"
      readonly record: Record<string, unknown>
      readonly images?: ReadonlyArray<{ readonly data: Uint8Array; readonly mimeType: string }>
    }
  /** The route's refusal, in the spec's shape with its HTTP status. */
  | { readonly _tag: "Refused"; readonly status: number; readonly code: string; readonly message: string }

/** What a tool may do: call a REST route as the caller; act on a browser session's page. */
export interface ToolIo {
  readonly rest: (request: RestRequest) => Effect.Effect<RestAnswer>
  readonly drive: (sessionId: string, action: PageAction) => Effect.Effect<ToolAnswer>
}

export interface ToolDef {
  readonly name: string
  readonly title: string
  readonly description: string
  readonly input: Schema.Top & Schema.Codec<any, any>
  /** The route (as the route table writes it) whose access the tool requires. */
  readonly route: { readonly method: string; readonly path: string }
  readonly readOnly: boolean
  readonly destructive: boolean
  readonly run: (input: any, io: ToolIo) => Effect.Effect<ToolAnswer>
}

const define = <S extends Schema.Top & Schema.Codec<any, any>>(def: {
  readonly name: string
  readonly title: string
  readonly description: string
  readonly input: S
  readonly route: readonly [method: string, path: string]
  readonly readOnly?: boolean
  readonly destructive?: boolean
  readonly run: (input: S["Type"], io: ToolIo) => Effect.Effect<ToolAnswer>
}): ToolDef => ({
  name: def.name,
  title: def.title,
  description: def.description,
  input: def.input,
  route: { method: def.route[0], path: def.route[1] },
  readOnly: def.readOnly ?? false,
  destructive: def.destructive ?? false,
  run: def.run
})

/** A route's answer as a tool's: its JSON record, or its `{ error: { code, message } }`. */
export const answerOf = (answer: RestAnswer, record?: Record<string, unknown>): ToolAnswer => {
  const json = jsonOf(answer) as any
  if (answer.status >= 400) {
    return {
      _tag: "Refused",
      status: answer.status,
      code: typeof json?.error?.code === "string" ? json.error.code : "internal_error",
      message: typeof json?.error?.message === "string" ? json.error.message : `HTTP ${answer.status}`
    }
  }
  return {
    _tag: "Record",
    record: record ?? (json !== null && typeof json === "object" ? json : { result: json })
  }
}

const seg = encodeURIComponent

const query = (params: Record<string, string | number | undefined>) => {
  const search = new URLSearchParams()
  for (const [key, value] of Object.entries(params)) if (value !== undefined) search.set(key, String(value))
  const text = search.toString()
  return text === "" ? "" : `?${text}`
}

const described = <S extends Schema.Top>(schema: S, description: string) => schema.annotate({ description })

const SessionId = described(Schema.String, "The session's id (`sess_...`).")
const sessionOnly = Schema.Struct({ session_id: SessionId })

const WorkspaceRef = described(Schema.String, "A workspace's name or id.")

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
        created.status >= 400 ? Effect.succeed(answerOf(created)) : waitReady(io, jsonOf(created) as any)
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
    run: (input, io) =>
      Effect.map(io.rest({ method: "GET", path: `/v1/sessions/${seg(input.session_id)}` }), (answer) =>
        answerOf(answer)
      )
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
  define({
    name: "sandbox_exec",
    title: "Run a command",
    description:
      "Runs a command in a sandbox session and answers with its exit code, stdout and stderr. Limited like POST /v1/sessions/{id}/exec.",
    input: Schema.Struct({
      session_id: SessionId,
      command: CommandField,
      cwd: Schema.optionalKey(described(Schema.String, "Working directory (default /root, the home).")),
      timeout_seconds: Schema.optionalKey(described(Schema.Int, "Stopped past this (default 60)."))
    }),
    route: ["POST", "/v1/sessions/{id}/exec"],
    run: ({ session_id, ...body }, io) =>
      Effect.map(
        io.rest({ method: "POST", path: `/v1/sessions/${seg(session_id)}/exec`, json: body }),
        (answer) => answerOf(answer)
      )
  }),
  define({
    name: "files_read",
    title: "Read a file",
    description:
      "A file of a sandbox session (at most 16 MB): `content` as UTF-8 text, or base64 with `encoding: base64` when it is not text.",
    input: Schema.Struct({
      session_id: SessionId,
      path: described(Schema.String, "Absolute, or relative to /root.")
    }),
    route: ["GET", "/v1/sessions/{id}/download"],
    readOnly: true,
    run: (input, io) =>
      Effect.map(
        io.rest({
          method: "GET",
          path: `/v1/sessions/${seg(input.session_id)}/download${query({ path: input.path })}`
        }),
        (answer): ToolAnswer => {
          if (answer.status >= 400) return answerOf(answer)
          let text: string | undefined
          try {
            text = new TextDecoder("utf-8", { fatal: true }).decode(answer.body)
          } catch {
            text = undefined
          }
          return answerOf(answer, {
            path: input.path,
            size: answer.body.byteLength,
            encoding: text === undefined ? "base64" : "utf8",
            content: text ?? Buffer.from(answer.body).toString("base64")
          })
        }
      )
  }),
  define({
    name: "files_write",
    title: "Write a file",
    description:
      "Writes `content` to a file of a sandbox session (made with its parent directories; at most 16 MB). Limited like POST /v1/sessions/{id}/upload.",
    input: Schema.Struct({
      session_id: SessionId,
      path: described(Schema.String, "Absolute, or relative to /root."),
      content: described(Schema.String, "The file's content."),
      encoding: Schema.optionalKey(
        described(
          Schema.Literals(["utf8", "base64"]),
          "How `content` is written: `utf8` (default) or `base64`."
        )
      )
    }),
    route: ["POST", "/v1/sessions/{id}/upload"],
    run: (input, io) => {
      const bytes =
        input.encoding === "base64" ? Buffer.from(input.content, "base64") : Buffer.from(input.content)
      const form = new FormData()
      form.set("path", input.path)
      form.set("file", new Blob([bytes]), "file")
      return Effect.map(
        io.rest({ method: "POST", path: `/v1/sessions/${seg(input.session_id)}/upload`, form }),
        (answer) => answerOf(answer)
      )
    }
  }),
  define({
    name: "workspaces_list",
    title: "List workspaces",
    description: "The account's workspaces: disks that outlive sessions (a browser profile, a sandbox home).",
    input: Schema.Struct({
      limit: Schema.optionalKey(described(Schema.Int, "Page size, 1 to 100.")),
      starting_after: Schema.optionalKey(described(Schema.String, "The last id of the previous page."))
    }),
    route: ["GET", "/v1/workspaces"],
    readOnly: true,
    run: (input, io) =>
      Effect.map(io.rest({ method: "GET", path: `/v1/workspaces${query(input)}` }), (answer) =>
        answerOf(answer)
      )
  }),
  define({
    name: "workspaces_create",
    title: "Create a workspace",
    description:
      "A new workspace (a browser profile or a sandbox home that sessions run on), empty or cloned.",
    input: Schema.Struct({
      name: Schema.optionalKey(described(Schema.String, "A slug; generated when omitted.")),
      session_type: Schema.optionalKey(
        described(
          Schema.Literals(["browser", "sandbox"]),
          "What it serves; fixed by its first session otherwise."
        )
      ),
      image: Schema.optionalKey(described(Schema.String, "A sandbox workspace's image.")),
      clone_from: Schema.optionalKey(described(Schema.String, "A workspace (name or id) to copy."))
    }),
    route: ["POST", "/v1/workspaces"],
    run: (input, io) =>
      Effect.map(io.rest({ method: "POST", path: "/v1/workspaces", json: input }), (answer) =>
        answerOf(answer)
      )
  }),
  define({
    name: "workspaces_snapshot",
    title: "Snapshot a workspace",
    description:
      "Archives a workspace into a named snapshot it can be restored from; answers once it is written.",
    input: Schema.Struct({
      workspace: WorkspaceRef,
      name: Schema.optionalKey(
        described(Schema.String, "The snapshot's name (a slug); generated when omitted.")
      )
    }),
    route: ["POST", "/v1/workspaces/{workspace}/snapshots"],
    run: ({ workspace, ...body }, io) =>
      Effect.map(
        io.rest({ method: "POST", path: `/v1/workspaces/${seg(workspace)}/snapshots`, json: body }),
        (answer) => answerOf(answer)
      )
  }),
  define({
    name: "jobs_create",
    title: "Create a job",
    description:
      "Queues a job (`kind`: screenshot, pdf, content, exec, snapshot, restore, import; see GET /v1/jobs/kinds for each input) and answers with it; poll jobs_get.",
    input: Schema.Struct({
      kind: described(Schema.String, "The job's kind."),
      input: Schema.optionalKey(described(Schema.Unknown, "The kind's input object."))
    }),
    route: ["POST", "/v1/jobs"],
    run: (input, io) =>
      Effect.map(io.rest({ method: "POST", path: "/v1/jobs", json: input }), (answer) => answerOf(answer))
  }),
  define({
    name: "jobs_get",
    title: "Get a job",
    description: "A job with its state, attempts and result.",
    input: Schema.Struct({ job_id: described(Schema.String, "The job's id (`job_...`).") }),
    route: ["GET", "/v1/jobs/{id}"],
    readOnly: true,
    run: (input, io) =>
      Effect.map(io.rest({ method: "GET", path: `/v1/jobs/${seg(input.job_id)}` }), (answer) =>
        answerOf(answer)
      )
  })
]

/** How long `sessions_create` waits for the session to be ready before answering with it as it is. */
const READY_WAIT_MS = 60_000

/** Polls the created session until it leaves `creating`: an agent's next call wants it ready. */
const waitReady = (io: ToolIo, created: { readonly id: string }): Effect.Effect<ToolAnswer> =>
  Effect.gen(function* () {
    const deadline = Date.now() + READY_WAIT_MS
    while (true) {
      const answer = yield* io.rest({ method: "GET", path: `/v1/sessions/${seg(created.id)}` })
      const record = jsonOf(answer) as any
      if (answer.status >= 400 || record?.status !== "creating" || Date.now() > deadline)
        return answerOf(answer)
      yield* Effect.sleep("50 millis")
    }
  })
