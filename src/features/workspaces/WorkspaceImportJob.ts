import { Effect, Schema } from "effect"
import * as Sql from "../../platform/db/Sql.ts"
import { Audit } from "../audit/Audit.ts"
import { JobFailed, jobKind } from "../jobs/JobKind.ts"
import { freshSession } from "../jobs/JobSession.ts"
import * as Exec from "../sessions/Exec.ts"
import { Sessions } from "../sessions/Sessions.ts"
import { fatal, Selector, type WorkspaceJobHelpers } from "./WorkspaceJobHelpers.ts"

/** An import's time limit for git. */
const IMPORT_TIMEOUT_SECONDS = 1800

/**
 * Clones `$1` (at `$2` when given) beside the home's content, then moves it
 * in: a retried attempt first removes what an interrupted one left.
 */
const IMPORT_SCRIPT = [
  "set -e",
  "cd /root",
  "rm -rf .rbs-import",
  'if [ -n "$2" ]; then git clone --quiet -- "$1" .rbs-import && git -C .rbs-import checkout --quiet "$2"',
  'else git clone --quiet --depth 1 -- "$1" .rbs-import; fi',
  "find .rbs-import -mindepth 1 -maxdepth 1 -exec mv -t . {} +",
  "rmdir .rbs-import",
  "git rev-parse HEAD"
].join("\n")

const ImportInput = Schema.Struct({
  workspace: Selector,
  url: Schema.String.check(
    Schema.makeFilter((url) => {
      try {
        const parsed = new URL(url)
        return parsed.protocol === "http:" || parsed.protocol === "https:"
      } catch {
        return false
      }
    })
  ),
  ref: Schema.optionalKey(Schema.String.check(Schema.isPattern(/^[A-Za-z0-9._/-]{1,255}$/)))
})

/**
 * The `import` job: a git repository cloned into a sandbox workspace's home
 * by `git` in a sandbox session on it, on the node that holds its disk.
 */
export const importJobKind = (helpers: WorkspaceJobHelpers) =>
  Effect.gen(function* () {
    const sessions = yield* Sessions
    const audit = yield* Audit
    const { sql, now, find, onDiskNode, holding } = helpers

    return jobKind({
      kind: "import",
      workspace: (input) => input.workspace,
      description:
        "Clones a git repository (`url`, http or https; `ref`: a branch, tag or commit, default the remote's HEAD) into a sandbox workspace's home, with `git` inside a sandbox session on it: through that session's metering egress proxy (its SSRF guard and its billing apply). Result: `{ workspace_id, url, commit }`. A clone git refuses (no such repository, no access, no such ref) fails the job, not retried.",
      input: ImportInput,
      requires: ["workspaces.write", "sessions.write", "exec.write"],
      runtime: "sandbox",
      timeoutSeconds: () => IMPORT_TIMEOUT_SECONDS + 120,
      run: (input, run) =>
        Effect.gen(function* () {
          const workspace = yield* find(run, input.workspace)
          const url = publicUrl(input.url)
          yield* onDiskNode(workspace.id)
          const exec = yield* holding(
            workspace.id,
            "importing",
            run.id,
            Effect.gen(function* () {
              const { sessionId, runtime } = yield* freshSession(
                sessions,
                run,
                "sandbox",
                { session_type: "sandbox", workspace: workspace.id },
                { workspaceStatus: "importing" }
              )
              const outcome = yield* Exec.execute(audit, sessionId, runtime, run.owner, {
                command: ["sh", "-c", IMPORT_SCRIPT, "sh", input.url, input.ref ?? ""],
                // Every address through the session's proxy, loopback too: it decides what may be reached.
                env: { NO_PROXY: "", no_proxy: "", GIT_TERMINAL_PROMPT: "0" },
                timeout_seconds: IMPORT_TIMEOUT_SECONDS
              }).pipe(
                Effect.mapError(
                  (error) => new JobFailed({ code: "runtime_failed", detail: error.message, retryable: true })
                )
              )
              return outcome.background
                ? yield* Effect.die("an import runs in the foreground")
                : outcome.result
            }).pipe(Effect.scoped)
          )
          if (exec.exit_code !== 0)
            return yield* fatal(
              "import_failed",
              `git could not clone ${url}: ${redact(exec.stderr, input.url, url).trim().slice(-1000) || exec.status}`
            )
          yield* sql`UPDATE workspaces SET github_repo = ${url}, updated_at = ${yield* now}
            WHERE id = ${workspace.id}`.pipe(Sql.orDefect)
          return { result: { workspace_id: workspace.id, url, commit: exec.stdout.trim() } }
        })
    })
  })

/** The URL without its credentials: what is stored and shown. */
export const publicUrl = (url: string) => {
  const parsed = new URL(url)
  parsed.username = ""
  parsed.password = ""
  return parsed.toString()
}

const redact = (text: string, secret: string, shown: string) =>
  secret === shown ? text : text.split(secret).join(shown)
