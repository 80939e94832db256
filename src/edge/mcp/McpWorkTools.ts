import { Effect, Schema } from "effect"
import { CommandField } from "../../kernel/Sandbox.ts"
import {
  answerOf,
  define,
  described,
  query,
  seg,
  SessionId,
  type ToolAnswer,
  type ToolDef,
  WorkspaceRef
} from "./McpTool.ts"

/** The tools of sandboxes' commands and files, workspaces and jobs (each its REST route, as `McpTools`'s). */
export const WORK_TOOLS: ReadonlyArray<ToolDef> = [
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
    instant: true,
    run: (input, io) =>
      io.read(["GET", "/v1/jobs/{id}"], input.job_id, ({ owner, jobs }) => jobs.get(owner, input.job_id))
  })
]
