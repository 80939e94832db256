import { Effect, Schema } from "effect"
import { CreateJobRequest } from "../../kernel/Job.ts"
import { CommandField } from "../../kernel/Sandbox.ts"
import { CreateWorkspaceRequest } from "../../kernel/Workspace.ts"
import { decodeInput } from "../../kernel/Validation.ts"
import { define, described, SessionId, type ToolAnswer, type ToolDef, WorkspaceRef } from "./McpTool.ts"

const decodeWorkspace = decodeInput(CreateWorkspaceRequest)
const decodeJob = decodeInput(CreateJobRequest)

/** A session tool's route parameter. */
const sessionParam = (input: { readonly session_id: string }) => ({ id: input.session_id })

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
    params: sessionParam,
    run: ({ session_id, ...body }, io) =>
      Effect.flatMap(io.sandbox.exec(io.owner, session_id, body), (outcome) =>
        outcome.background ? io.record(outcome.info) : io.record(outcome.result)
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
    params: sessionParam,
    readOnly: true,
    run: (input, io) =>
      Effect.map(io.sandbox.readFile(io.owner, input.session_id, input.path), (file): ToolAnswer => {
        let text: string | undefined
        try {
          text = new TextDecoder("utf-8", { fatal: true }).decode(file.content)
        } catch {
          text = undefined
        }
        return {
          _tag: "Record",
          record: {
            path: input.path,
            size: file.content.byteLength,
            encoding: text === undefined ? "base64" : "utf8",
            content: text ?? Buffer.from(file.content).toString("base64")
          }
        }
      })
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
    params: sessionParam,
    // A multipart body: the file's content is bytes, whatever they are.
    checksText: false,
    run: (input, io) => {
      const bytes =
        input.encoding === "base64" ? Buffer.from(input.content, "base64") : Buffer.from(input.content)
      return Effect.flatMap(io.sandbox.writeFile(io.owner, input.session_id, input.path, bytes), (written) =>
        io.record(written)
      )
    }
  }),
  define({
    name: "files_list",
    title: "List a directory",
    description:
      "A sandbox directory's entries by name (name, path, type, size, mode, modified_at, a link's target), a page at a time: pass `next_cursor` as `cursor` for the next. Limited like GET /v1/sessions/{id}/files.",
    input: Schema.Struct({
      session_id: SessionId,
      path: Schema.optionalKey(described(Schema.String, "Absolute, or relative to /root (default /root).")),
      limit: Schema.optionalKey(described(Schema.Int, "Entries a page, 1 to 1000 (default 200).")),
      cursor: Schema.optionalKey(described(Schema.String, "The last page's `next_cursor`."))
    }),
    route: ["GET", "/v1/sessions/{id}/files"],
    params: sessionParam,
    readOnly: true,
    run: (input, io) =>
      Effect.flatMap(
        io.sandbox.listFiles(io.owner, input.session_id, input.path ?? "/root", {
          limit: input.limit,
          cursor: input.cursor
        }),
        (page) => io.record(page)
      )
  }),
  define({
    name: "files_stat",
    title: "A path's entry",
    description: "One path of a sandbox session as files_list shows it (a link as a link).",
    input: Schema.Struct({
      session_id: SessionId,
      path: described(Schema.String, "Absolute, or relative to /root.")
    }),
    route: ["GET", "/v1/sessions/{id}/files/stat"],
    params: sessionParam,
    readOnly: true,
    run: (input, io) =>
      Effect.flatMap(io.sandbox.statFile(io.owner, input.session_id, input.path), (entry) => io.record(entry))
  }),
  define({
    name: "files_mkdir",
    title: "Make a directory",
    description:
      "Makes a directory in a sandbox session (with `parents: true`, the missing ones above it too, and none an error if there).",
    input: Schema.Struct({
      session_id: SessionId,
      path: described(Schema.String, "Absolute, or relative to /root."),
      parents: Schema.optionalKey(described(Schema.Boolean, "Make missing parents too."))
    }),
    route: ["POST", "/v1/sessions/{id}/files/mkdir"],
    params: sessionParam,
    run: ({ session_id, ...input }, io) =>
      Effect.flatMap(io.sandbox.makeDirectory(io.owner, session_id, input), (entry) => io.record(entry))
  }),
  define({
    name: "files_move",
    title: "Move or rename",
    description:
      "Renames a file, link or directory of a sandbox session; what is at `to` is replaced only with `overwrite: true`.",
    input: Schema.Struct({
      session_id: SessionId,
      from: described(Schema.String, "Absolute, or relative to /root."),
      to: described(Schema.String, "Absolute, or relative to /root."),
      overwrite: Schema.optionalKey(
        described(Schema.Boolean, "Replace a file or an empty directory at `to`.")
      )
    }),
    route: ["POST", "/v1/sessions/{id}/files/move"],
    params: sessionParam,
    run: ({ session_id, ...input }, io) =>
      Effect.flatMap(io.sandbox.moveFile(io.owner, session_id, input), (entry) => io.record(entry))
  }),
  define({
    name: "files_remove",
    title: "Remove a path",
    description:
      "Removes a file, a link or an empty directory of a sandbox session; with `recursive: true` a directory and everything in it.",
    input: Schema.Struct({
      session_id: SessionId,
      path: described(Schema.String, "Absolute, or relative to /root."),
      recursive: Schema.optionalKey(described(Schema.Boolean, "A directory with its contents."))
    }),
    route: ["DELETE", "/v1/sessions/{id}/files"],
    params: sessionParam,
    run: (input, io) =>
      Effect.flatMap(
        io.sandbox.removeFile(io.owner, input.session_id, input.path, input.recursive ?? false),
        () => io.record({ path: input.path, removed: true })
      )
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
    // The route takes no query: `limit` and `starting_after` change nothing.
    run: (_input, io) =>
      Effect.flatMap(io.workspaces.list(io.owner), (data) => io.record({ object: "list", data }))
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
      Effect.gen(function* () {
        return yield* io.record(yield* io.workspaces.create(io.owner, yield* decodeWorkspace(input)))
      })
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
    params: (input) => ({ workspace: input.workspace }),
    run: (input, io) =>
      Effect.flatMap(io.snapshots.snapshot(io.owner, input.workspace, input.name), (snapshot) =>
        io.record(snapshot)
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
      Effect.gen(function* () {
        return yield* io.record(yield* io.jobs.create(io.owner, yield* decodeJob(input)))
      })
  }),
  define({
    name: "jobs_get",
    title: "Get a job",
    description: "A job with its state, attempts and result.",
    input: Schema.Struct({ job_id: described(Schema.String, "The job's id (`job_...`).") }),
    route: ["GET", "/v1/jobs/{id}"],
    params: (input) => ({ id: input.job_id }),
    readOnly: true,
    run: (input, io) => Effect.flatMap(io.jobs.get(io.owner, input.job_id), (job) => io.record(job))
  })
]
