import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { audits, requires } from "../policy/Access.ts"
import { Authenticate, Authorize } from "../policy/AuthMiddleware.ts"
import {
  CapacityExhausted,
  ConcurrencyLimitReached,
  ConnectionLimitReached,
  IdempotencyConflict,
  PaymentRequired,
  RateLimited,
  ServiceUnavailable,
  SessionKindUnavailable,
  SessionNotFound,
  SessionNotOpen,
  SessionTypeMismatch
} from "../../kernel/Errors.ts"
import {
  CommandInfo,
  CommandList,
  DownloadList,
  FileInfo,
  FileInfoList,
  FileWatchInfo,
  FileWatchList,
  FileWatchRequest,
  MakeDirectoryRequest,
  MoveFileRequest,
  ExecRequest,
  ExecResult,
  GatewayToken,
  GatewayTokenRequest,
  KillRequest,
  RunRequest,
  RunResult,
  SelfTestReport,
  StdinRequest,
  StdinResult,
  BrowserUploadResult,
  UploadResult
} from "../../kernel/Sandbox.ts"
import {
  CommandNotFound,
  CommandNotRunning,
  DirectoryNotEmpty,
  FileExists,
  FileNotFound,
  FileTooLarge,
  ProcessLimitReached,
  StdinClosed,
  StdinFull,
  TooManyUploads,
  TooManyWatches,
  WatchNotFound,
  WrongFileType
} from "../../kernel/SandboxErrors.ts"
import { PerPrincipalRateLimit, RouteRateLimit } from "../limits/LimitsMiddleware.ts"

const id = { id: Schema.String }
const command = { id: Schema.String, cid: Schema.String }
const watch = { id: Schema.String, wid: Schema.String }
/** What reaching a live sandbox may answer. */
const live = [
  SessionNotFound.Wire,
  SessionNotOpen.Wire,
  SessionTypeMismatch.Wire,
  ServiceUnavailable.Wire
] as const
/** What reaching a live sandbox over a connection it counts (`LIMIT_CONNECTIONS_PER_*`) may answer. */
const leased = [...live, ConnectionLimitReached.Wire] as const
/** What a call on a sandbox's file system may answer, past reaching it. */
const fileSystem = [
  ...leased,
  FileNotFound.Wire,
  FileExists.Wire,
  DirectoryNotEmpty.Wire,
  WrongFileType.Wire,
  RateLimited.Wire
] as const
const PATH_RULES =
  "Paths are absolute, or relative to `/root`; one that climbs above `/` with `..` is 400 `invalid_field`, and the sandbox's own file system is all a path reaches (its links resolve inside it). A link is shown as a link, never followed. Sandbox sessions only: a browser session is 409 `session_type_mismatch`."

const LIMIT_NOTE =
  "Limited per principal (the key, user or service account): `LIMIT_EXEC_PER_MINUTE` (default 600) for exec, stdin, kill, PTYs and the file system calls (list, stat, mkdir, move, remove, watches), `LIMIT_FILE_TRANSFERS_PER_MINUTE` (120) for uploads and downloads, with the `X-RateLimit-*` headers (`X-RateLimit-Scope: principal`); 429 `rate_limited` with `Retry-After` beyond."

/**
 * Sandbox sessions: commands (foreground, background, streamed), files, the
 * self-test, and the one-shot `POST /v1/exec`. Each is answered on the node
 * that runs the sandbox: a call of its actor (`SandboxCalls`), a file or an
 * event stream through the session door.
 */
export class SandboxApi extends HttpApiGroup.make("sandbox")
  .add(
    HttpApiEndpoint.post("exec", "/v1/sessions/:id/exec", {
      params: id,
      payload: ExecRequest,
      success: [ExecResult, CommandInfo.pipe(HttpApiSchema.status(202))],
      error: [...leased, ProcessLimitReached.Wire, StdinFull.Wire, RateLimited.Wire]
    })
      .annotateMerge(requires("exec.write", "any", audits("command.started", "session", "id")))
      .annotate(PerPrincipalRateLimit, "exec")
      .annotate(
        OpenApi.Description,
        `Runs a command in the sandbox (as its root, in a user namespace of its own: unprivileged on the host). \`command\` a string (through \`/bin/sh -c\`) or an argv array; \`cwd\` absolute or relative to \`/root\` (400 \`invalid_field\` if it does not exist or climbs above \`/\`); \`env\` over the sandbox's own; \`stdin\` (\`stdin_encoding\` \`utf8\` or \`base64\`). In the foreground (default) it answers once the command ends: \`exit_code\`, \`signal\` (and \`oom_killed\` when the kernel killed it for the sandbox's memory), \`stdout\` and \`stderr\` (UTF-8, the first 1 MiB of each; \`truncated\` past it), \`timeout_seconds\` default 600 (then \`timed_out\`). With \`background: true\` it answers 202 with the command at once; follow it with \`.../commands/{cid}/stream\`, write to it with \`.../stdin\`. A program that cannot be run ends at once with exit code 127 and the reason on stderr, as a shell would say. 409 \`process_limit\` when the sandbox runs its \`resources.pids\` processes. ${LIMIT_NOTE}`
      ),
    HttpApiEndpoint.get("commands", "/v1/sessions/:id/commands", {
      params: id,
      success: CommandList,
      error: leased
    })
      .annotateMerge(requires("sessions.read"))
      .annotate(
        OpenApi.Description,
        "The sandbox's commands, newest first (the last 1000, running or ended), while the session runs."
      ),
    HttpApiEndpoint.get("command", "/v1/sessions/:id/commands/:cid", {
      params: command,
      success: CommandInfo,
      error: [...leased, CommandNotFound.Wire]
    }).annotateMerge(requires("sessions.read")),
    HttpApiEndpoint.get("stream", "/v1/sessions/:id/commands/:cid/stream", {
      params: command,
      query: {
        encoding: Schema.optionalKey(Schema.Literals(["utf8", "base64"])),
        last_event_id: Schema.optionalKey(Schema.String)
      },
      success: Schema.String.pipe(HttpApiSchema.asText({ contentType: "text/event-stream" })),
      error: [...leased, CommandNotFound.Wire]
    })
      .annotateMerge(requires("sessions.read"))
      .annotate(
        OpenApi.Description,
        'The command\'s output as server-sent events: `stdout` and `stderr` (`data`: `{"data": "..."}`, UTF-8 text, or base64 with `?encoding=base64` for exact bytes), then one `exit` (`{"status", "exit_code", "signal", "oom_killed"}`) after which the stream ends. Each event has an `id`; reconnect with the last one in `Last-Event-ID` (or `?last_event_id=`) to resume with the next: nothing lost, nothing twice. The whole output from the start is replayed to a new stream; a command keeps its first 64 MiB of output for streams, and the commands of one session 256 MiB together (more is counted in `output_dropped_bytes`, not kept). A comment line every 15 s keeps an idle stream open through proxies.'
      ),
    HttpApiEndpoint.post("stdin", "/v1/sessions/:id/commands/:cid/stdin", {
      params: command,
      payload: [StdinRequest, Schema.Null],
      success: StdinResult,
      error: [
        ...leased,
        CommandNotFound.Wire,
        CommandNotRunning.Wire,
        StdinClosed.Wire,
        StdinFull.Wire,
        RateLimited.Wire
      ]
    })
      .annotateMerge(requires("exec.write", "any", audits("command.stdin_written", "session", "id")))
      .annotate(PerPrincipalRateLimit, "exec")
      .annotate(
        OpenApi.Description,
        `Writes \`data\` (\`encoding\` \`utf8\` or \`base64\`) to the command's standard input; \`eof: true\` closes it after. 409 \`command_not_running\` once the command ended, 409 \`stdin_closed\` after an \`eof\` (a foreground command's stdin is closed when it starts). 429 \`stdin_full\` when the command would hold more than 16 MiB of standard input it has not read yet, or its session's commands more than 64 MiB together: nothing of the write is taken; retry once the program reads. ${LIMIT_NOTE}`
      ),
    HttpApiEndpoint.post("kill", "/v1/sessions/:id/commands/:cid/kill", {
      params: command,
      payload: [KillRequest, Schema.Null],
      success: CommandInfo,
      error: [...leased, CommandNotFound.Wire, CommandNotRunning.Wire, RateLimited.Wire]
    })
      .annotateMerge(requires("exec.write", "any", audits("command.killed", "session", "id")))
      .annotate(PerPrincipalRateLimit, "exec")
      .annotate(
        OpenApi.Description,
        `Signals the command's whole process group: \`signal\` a name (default \`SIGTERM\`, followed by \`SIGKILL\` after 5 s if it still runs). Its status becomes \`killed\`. 409 \`command_not_running\` once it ended. ${LIMIT_NOTE}`
      ),
    HttpApiEndpoint.post("upload", "/v1/sessions/:id/upload", {
      params: id,
      success: UploadResult,
      error: [...leased, FileTooLarge.Wire, TooManyUploads.Wire, RateLimited.Wire]
    })
      .annotateMerge(requires("files.write", "any", audits("file.uploaded", "session", "id")))
      .annotate(PerPrincipalRateLimit, "file_transfer")
      .annotate(
        OpenApi.Description,
        `Multipart form (\`multipart/form-data\`) with fields \`path\` (where in the sandbox: absolute, or relative to \`/root\`; parents are made) and \`file\`: at most 16 MiB (16777216 bytes); one byte over is 413 \`file_too_large\` and nothing is written. The file is written whole or not at all (to a temporary name, then renamed), as the sandbox's root, mode 0644. A session takes 4 uploads at once: a fifth while they are under way is 429 \`too_many_uploads\` before its body is read. A path that climbs above \`/\` with \`..\` is 400 \`invalid_field\`; the sandbox's own filesystem is all a path can reach (its symlinks resolve inside it). Sandbox sessions only: a browser session is 409 \`session_type_mismatch\`. ${LIMIT_NOTE}`
      ),
    HttpApiEndpoint.post("browserUpload", "/v1/sessions/:id/uploads", {
      params: id,
      success: BrowserUploadResult,
      error: [...live, FileTooLarge.Wire, TooManyUploads.Wire, RateLimited.Wire]
    })
      .annotateMerge(requires("files.write", "any", audits("file.uploaded", "session", "id")))
      .annotate(PerPrincipalRateLimit, "file_transfer")
      .annotate(
        OpenApi.Description,
        `A file for a browser session's pages (an extension): multipart form (\`multipart/form-data\`) with the field \`file\` (its file name is the upload's name, or give the field \`name\`): at most 16 MiB (16777216 bytes); one byte over is 413 \`file_too_large\` and nothing is written. Answers \`path\`, where the session's browser sees the file: give it to a file input (puppeteer's \`uploadFile(path)\`, CDP's \`DOM.setFileInputFiles\`), which takes the session's own uploads and no other path of the host. A name that is not a plain file name (\`/\`, \`..\`, a leading \`.\`) is 400 \`invalid_field\`; the same name again replaces the file. 4 uploads at once per session (429 \`too_many_uploads\` beyond). Browser and context sessions only: a sandbox is 409 \`session_type_mismatch\` (its files go through \`POST .../upload\`). ${LIMIT_NOTE}`
      ),
    HttpApiEndpoint.get("download", "/v1/sessions/:id/download", {
      params: id,
      query: { path: Schema.optionalKey(Schema.String) },
      success: Schema.Uint8Array.pipe(
        HttpApiSchema.asUint8Array({ contentType: "application/octet-stream" })
      ),
      error: [...leased, FileNotFound.Wire, FileTooLarge.Wire, RateLimited.Wire]
    })
      .annotateMerge(requires("files.read"))
      .annotate(PerPrincipalRateLimit, "file_transfer")
      .annotate(
        OpenApi.Description,
        `A file, streamed with its \`Content-Length\`. Of a sandbox: \`path\` in the sandbox (as for upload; 16 MiB at most, else 413). Of a browser session: the name of a file its browser downloaded (\`GET .../downloads\`), while the session runs and for \`DOWNLOAD_RETENTION_HOURS\` (24) after it ends, through any node; \`..\`, absolute paths and links out of the session's downloads are refused. 404 \`file_not_found\`. ${LIMIT_NOTE}`
      ),
    HttpApiEndpoint.get("downloads", "/v1/sessions/:id/downloads", {
      params: id,
      success: DownloadList,
      error: live
    })
      .annotateMerge(requires("files.read"))
      .annotate(
        OpenApi.Description,
        "The files a browser session's pages downloaded (the browser writes them in the session's own directory on its node): name, size, time. Kept on the node that ran the session for `DOWNLOAD_RETENTION_HOURS` (24) after it ends, and reached through any node. Whatever download path a client sets (playwright sets its own), the files land here: fetch one with `GET .../download?path=<name>`."
      ),
    HttpApiEndpoint.get("listFiles", "/v1/sessions/:id/files", {
      params: id,
      query: {
        path: Schema.optionalKey(Schema.String),
        limit: Schema.optionalKey(Schema.FiniteFromString),
        cursor: Schema.optionalKey(Schema.String)
      },
      success: FileInfoList,
      error: fileSystem
    })
      .annotateMerge(requires("files.read"))
      .annotate(PerPrincipalRateLimit, "exec")
      .annotate(
        OpenApi.Description,
        `A directory's entries (\`path\`, default \`/root\`), by name (byte order): each with \`name\`, \`path\`, \`type\` (\`file\`, \`directory\`, \`symlink\`, \`other\`), \`size\`, \`mode\` (octal, \`"0644"\`), \`modified_at\` and a link's \`symlink_target\`. \`limit\` 1 to 1000 (default 200); pass \`next_cursor\` as \`cursor\` for the next page (entries made or removed between pages may be missed or shown, as with any listing of a live directory). 404 \`file_not_found\`; 409 \`wrong_file_type\` for a file. ${PATH_RULES} ${LIMIT_NOTE}`
      ),
    HttpApiEndpoint.get("statFile", "/v1/sessions/:id/files/stat", {
      params: id,
      query: { path: Schema.optionalKey(Schema.String) },
      success: FileInfo,
      error: fileSystem
    })
      .annotateMerge(requires("files.read"))
      .annotate(PerPrincipalRateLimit, "exec")
      .annotate(
        OpenApi.Description,
        `One path's entry, as a list shows it. 404 \`file_not_found\`. ${PATH_RULES} ${LIMIT_NOTE}`
      ),
    HttpApiEndpoint.post("makeDirectory", "/v1/sessions/:id/files/mkdir", {
      params: id,
      payload: MakeDirectoryRequest,
      success: FileInfo.pipe(HttpApiSchema.status(201)),
      error: fileSystem
    })
      .annotateMerge(requires("files.write", "any", audits("file.directory_created", "session", "id")))
      .annotate(PerPrincipalRateLimit, "exec")
      .annotate(
        OpenApi.Description,
        `Makes directory \`path\` (mode 0755, as the sandbox's root) and answers its entry. Without \`parents\`: 409 \`file_exists\` when something is there, 404 \`file_not_found\` when its parent is missing; with \`parents: true\` the missing parents are made too and a directory already there is no error (a file there still is 409 \`file_exists\`). ${PATH_RULES} ${LIMIT_NOTE}`
      ),
    HttpApiEndpoint.post("moveFile", "/v1/sessions/:id/files/move", {
      params: id,
      payload: MoveFileRequest,
      success: FileInfo,
      error: fileSystem
    })
      .annotateMerge(requires("files.write", "any", audits("file.moved", "session", "id")))
      .annotate(PerPrincipalRateLimit, "exec")
      .annotate(
        OpenApi.Description,
        `Renames \`from\` to \`to\` (a file, link or directory, at once: a rename, never a copy) and answers its entry where it went. 409 \`file_exists\` when something is at \`to\`, unless \`overwrite: true\` (which replaces a file, or an empty directory: 409 \`directory_not_empty\` otherwise); 404 \`file_not_found\` when \`from\` or \`to\`'s parent is missing; a directory into itself is 400 \`invalid_field\` (\`to\`). ${PATH_RULES} ${LIMIT_NOTE}`
      ),
    HttpApiEndpoint.delete("removeFile", "/v1/sessions/:id/files", {
      params: id,
      query: {
        path: Schema.optionalKey(Schema.String),
        recursive: Schema.optionalKey(Schema.Literals(["true", "false"]))
      },
      success: HttpApiSchema.NoContent,
      error: fileSystem
    })
      .annotateMerge(requires("files.write", "any", audits("file.removed", "session", "id")))
      .annotate(PerPrincipalRateLimit, "exec")
      .annotate(
        OpenApi.Description,
        `Removes a file, a link (not what it points to) or an empty directory; with \`recursive=true\` a directory and everything in it. 409 \`directory_not_empty\` for a directory with entries without \`recursive\`; 404 \`file_not_found\`; \`/\` itself is 400 \`invalid_field\`. ${PATH_RULES} ${LIMIT_NOTE}`
      ),
    HttpApiEndpoint.post("startWatch", "/v1/sessions/:id/files/watches", {
      params: id,
      payload: FileWatchRequest,
      success: FileWatchInfo.pipe(HttpApiSchema.status(201)),
      error: [...fileSystem, TooManyWatches.Wire]
    })
      .annotateMerge(requires("files.read", "any", audits("file_watch.created", "session", "id")))
      .annotate(PerPrincipalRateLimit, "exec")
      .annotate(
        OpenApi.Description,
        `Watches directory \`path\` for changes (with \`recursive: true\`, every directory below it too, those made later included, up to 8192 directories: more is 400 \`invalid_field\`), from inside the sandbox, and answers the watch once every change after it is seen. Read its changes with \`GET .../files/watches/{wid}/events\`; the watch keeps its newest 10000 changes (2 MiB of them at most) for readers, so a client that reconnects resumes where it stopped. It ends (\`status\` \`ended\`) when its directory is removed or moved away, and with its session. A session holds 8 watches at once (ended ones count until deleted): 429 \`too_many_watches\` beyond. 404 \`file_not_found\`; 409 \`wrong_file_type\` for a file. ${PATH_RULES} ${LIMIT_NOTE}`
      ),
    HttpApiEndpoint.get("watches", "/v1/sessions/:id/files/watches", {
      params: id,
      success: FileWatchList,
      error: leased
    })
      .annotateMerge(requires("files.read"))
      .annotate(OpenApi.Description, "The session's watches, newest first, while the session runs."),
    HttpApiEndpoint.get("watch", "/v1/sessions/:id/files/watches/:wid", {
      params: watch,
      success: FileWatchInfo,
      error: [...leased, WatchNotFound.Wire]
    }).annotateMerge(requires("files.read")),
    HttpApiEndpoint.get("watchEvents", "/v1/sessions/:id/files/watches/:wid/events", {
      params: watch,
      query: { last_event_id: Schema.optionalKey(Schema.String) },
      success: Schema.String.pipe(HttpApiSchema.asText({ contentType: "text/event-stream" })),
      error: [...leased, WatchNotFound.Wire]
    })
      .annotateMerge(requires("files.read"))
      .annotate(
        OpenApi.Description,
        'The watch\'s changes as server-sent events, from its first kept one: `create`, `modify` (a write to a file), `delete`, `move` (`to` where it went; a rename into the watched tree from outside is a `create`, out of it a `delete`) and `overflow` (changes were lost: the sandbox\'s kernel queue filled, a directory past the bound is not followed, or the reader is behind the 10000 (2 MiB) kept; list again), each with `data` `{"path", "to", "directory"}` (absolute paths in the sandbox). Each change has an `id`; reconnect with the last one in `Last-Event-ID` (or `?last_event_id=`) to resume with the next: nothing twice. Once the watch has ended and its changes are sent, one `end` event, and the stream ends. A comment line every 15 s keeps an idle stream open through proxies.'
      ),
    HttpApiEndpoint.delete("stopWatch", "/v1/sessions/:id/files/watches/:wid", {
      params: watch,
      success: HttpApiSchema.NoContent,
      error: [...leased, WatchNotFound.Wire]
    })
      .annotateMerge(requires("files.read", "any", audits("file_watch.deleted", "session", "id")))
      .annotate(
        OpenApi.Description,
        "Ends the watch and forgets it: its streams end, and its place is free."
      ),
    HttpApiEndpoint.post("selfTest", "/v1/sessions/:id/self-test", {
      params: id,
      success: SelfTestReport,
      error: live
    })
      .annotateMerge(requires("sessions.write"))
      .annotate(
        OpenApi.Description,
        "Checks the session's runtime and answers a report of named checks, each with `ok`, `duration_ms` and a `detail`. A sandbox: a command runs, its disk takes a write, its egress proxy answers (a request through it, refused or not, proves the way out; no external address is needed), its memory and process limits are in force, and it has no network but its proxy. A browser: its CDP answers, a page renders, its egress proxy answers. `ok` is true when every check passed."
      ),
    HttpApiEndpoint.post("gatewayToken", "/v1/sessions/:id/gateway-token", {
      params: id,
      payload: GatewayTokenRequest,
      success: GatewayToken,
      error: [SessionNotFound.Wire, SessionNotOpen.Wire, SessionTypeMismatch.Wire]
    })
      .annotateMerge(requires("sessions.read", "any", audits("session.gateway_link_issued", "session", "id")))
      .annotate(
        OpenApi.Description,
        "A signed link to a port of the sandbox through its gateway, for a browser that has no key to send (an extension): `url` is `{PUBLIC_URL}/s/{id}/{port}/?rbs_token=...`, or the port's own origin `{scheme}://{port}-{id}.{GATEWAY_DOMAIN}/?rbs_token=...` when the service has a gateway domain; opening it sets a cookie for the session's gateway path (or that host alone) and takes the token out of the URL, so the page's own requests are let in. Valid `ttl_seconds` (60 to 86400, default 3600), never past the session's TTL. Whoever holds the link reaches the session's ports until then; every response through the path form is served as an opaque-origin document (`Content-Security-Policy: sandbox`), so a page there cannot act on this service as the visitor; at its own origin a page needs no such header."
      ),
    HttpApiEndpoint.post("run", "/v1/exec", {
      payload: RunRequest,
      success: RunResult,
      error: [
        PaymentRequired.Wire,
        RateLimited.Wire,
        ConcurrencyLimitReached.Wire,
        CapacityExhausted.Wire,
        SessionKindUnavailable.Wire,
        IdempotencyConflict.Wire,
        ...leased,
        ProcessLimitReached.Wire,
        StdinFull.Wire
      ]
    })
      .annotateMerge(requires("exec.write", "any", audits("command.started", "session")))
      .annotate(PerPrincipalRateLimit, "exec")
      .annotate(
        OpenApi.Description,
        `Runs one command in a sandbox of its own and answers as a foreground exec, plus \`session_id\`: a sandbox session is created (\`image\`, \`region\`, \`ttl_seconds\`, \`resources\` as for \`POST /v1/sessions\`; the same balance, concurrency and creation limits; 503 \`session_type_unavailable\` when no node of the service runs sandboxes, with why), the command runs, the session ends (\`client_delete\`) and is billed like any session. The common "run this snippet" call. ${LIMIT_NOTE}`
      )
  )
  .middleware(RouteRateLimit)
  .middleware(Authorize)
  .middleware(Authenticate)
  .annotate(OpenApi.Title, "Sandboxes") {}
