import { Effect, Schema } from "effect"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import * as DataDir from "../../platform/files/DataDir.ts"
import { Audit } from "../audit/Audit.ts"
import { DEFAULT_EXEC_TIMEOUT_SECONDS, ExecRequest } from "../../kernel/Sandbox.ts"
import * as Exec from "../sessions/Exec.ts"
import { Sessions } from "../sessions/Sessions.ts"
import { JobFailed, jobKind } from "./JobKind.ts"
import { type DiskNode, freshSession, onDiskNode, WorkspaceNodes } from "./JobSession.ts"

const { background: _background, ...execFields } = ExecRequest.fields

const ExecInput = Schema.Struct({
  ...execFields,
  image: Schema.optionalKey(
    Schema.String.annotate({ description: "The sandbox image (default the node's `SANDBOX_IMAGE`)." })
  ),
  workspace: Schema.optionalKey(
    Schema.String.annotate({
      description:
        "A sandbox workspace (name or id) as the sandbox's home: the command sees its files, and what it writes there is kept. Default: a fresh home."
    })
  )
})

/** `exec`: one command in a fresh sandbox session, as `POST /v1/exec` runs it, without a client waiting. */
const execJobKind = (sessions: Sessions["Service"], audit: Audit["Service"], diskNode: DiskNode) =>
  jobKind({
    kind: "exec",
    description:
      "Runs `command` in a fresh sandbox session (as `POST /v1/exec` does) and ends the session. Succeeds when the command exits 0; a non-zero exit or a timeout fails the job (not retried). Result: the command's `exit_code`, `status`, `stdout`, `stderr` (1 MiB each at most), `duration_ms`; its whole stdout at `result_url` (text/plain).",
    input: ExecInput,
    requires: ["sessions.write", "exec.write"],
    runtime: "sandbox",
    workspace: (input) => input.workspace,
    timeoutSeconds: (input) => (input.timeout_seconds ?? DEFAULT_EXEC_TIMEOUT_SECONDS) + 60,
    run: ({ image, workspace, ...exec }, run) =>
      Effect.gen(function* () {
        if (workspace !== undefined) yield* onDiskNode(diskNode, run, workspace)
        const { sessionId, runtime } = yield* freshSession(sessions, run, "sandbox", {
          session_type: "sandbox",
          ...(image === undefined ? {} : { image }),
          ...(workspace === undefined ? {} : { workspace })
        })
        const outcome = yield* Exec.execute(audit, sessionId, runtime, run.owner, exec).pipe(
          Effect.mapError(
            (error) =>
              new JobFailed({
                code: error._tag === "InvalidField" ? "invalid_input" : "runtime_failed",
                detail: error.message,
                retryable: error._tag === "SessionNotOpen"
              })
          )
        )
        if (outcome.background) return yield* Effect.die("a job's command runs in the foreground")
        const result = outcome.result
        if (result.exit_code !== 0) {
          return yield* new JobFailed({
            code: "command_failed",
            detail: `The command ended ${result.status} with exit code ${String(result.exit_code)}: ${result.stderr.slice(-500)}`,
            retryable: false
          })
        }
        const path = Path.join(run.workDir, "stdout.txt")
        yield* Effect.promise(() => Fs.writeFile(path, result.stdout, { mode: DataDir.PRIVATE_FILE }))
        return { result, file: { path, contentType: "text/plain; charset=utf-8" } }
      })
  })

/** `exec`: a command in a fresh sandbox session on the claiming node. */
export const kinds = Effect.gen(function* () {
  const { diskNode } = yield* WorkspaceNodes
  return [execJobKind(yield* Sessions, yield* Audit, diskNode)]
})
