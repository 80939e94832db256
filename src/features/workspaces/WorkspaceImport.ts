import { Context, Effect, Layer } from "effect"
import { Audit } from "../audit/Audit.ts"
import { Jobs } from "../jobs/Jobs.ts"
import type { Owner } from "../../kernel/Owner.ts"
import { permits } from "../../kernel/Owner.ts"
import { Forbidden, InvalidField, type ResourceLimitReached } from "../../kernel/Errors.ts"
import {
  ImportFailed,
  type ImportWorkspaceRequest,
  isSlug,
  type StorageLimitReached,
  type WorkspaceInfo
} from "../../kernel/Workspace.ts"
import { Workspaces } from "./Workspaces.ts"
import { publicUrl } from "./WorkspaceImportJob.ts"
import { generatedName, toWorkspaceInfo } from "./WorkspaceRows.ts"
import { JOB_WAIT_MS, type JobOutcomeError, WorkspaceStore } from "./WorkspaceStore.ts"

/** A workspace name from a repository's URL (`.../my-repo.git` is `my-repo`), if it makes a slug. */
const repoSlug = (url: string) => {
  const last =
    new URL(url).pathname
      .split("/")
      .filter((part) => part !== "")
      .pop() ?? ""
  const slug = last
    .replace(/\.git$/, "")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 63)
  return isSlug(slug) ? slug : undefined
}

/**
 * `POST /v1/workspaces/import`: a sandbox workspace (named after the
 * repository when free) with a public repository cloned into its home by an
 * `import` job; a failed import keeps no workspace.
 */
export class WorkspaceImport extends Context.Service<
  WorkspaceImport,
  {
    readonly importRepo: (
      owner: Owner,
      input: ImportWorkspaceRequest
    ) => Effect.Effect<
      WorkspaceInfo,
      InvalidField | Forbidden | JobOutcomeError | StorageLimitReached | ImportFailed | ResourceLimitReached
    >
  }
>()("rbs/workspaces/WorkspaceImport") {
  static readonly layer = Layer.effect(
    WorkspaceImport,
    Effect.gen(function* () {
      const audit = yield* Audit
      const jobs = yield* Jobs
      const { find, failedJob } = yield* WorkspaceStore
      const { create, remove } = yield* Workspaces
      const importRepo = Effect.fn("Workspaces.importRepo")(function* (
        owner: Owner,
        input: ImportWorkspaceRequest
      ) {
        // Public repositories: a URL with credentials (or a query, where tokens go) would keep them in the
        // job's input, the workspace's git config and its snapshots. Refused rather than stored.
        if (
          !/^https?:\/\//.test(input.url) ||
          !URL.canParse(input.url) ||
          new URL(input.url).username !== "" ||
          new URL(input.url).password !== "" ||
          new URL(input.url).search !== ""
        )
          return yield* new InvalidField({ field: "url" })
        if (input.ref != null && !/^[A-Za-z0-9._/-]{1,255}$/.test(input.ref))
          return yield* new InvalidField({ field: "ref" })
        // Its git runs in a sandbox session on it: the caller needs what that takes.
        if (!permits(owner, "sessions.write") || !permits(owner, "exec.write")) return yield* new Forbidden()
        const fromRepo = repoSlug(input.url)
        const name =
          input.name ??
          (fromRepo !== undefined && (yield* find(owner, fromRepo).pipe(Effect.option))._tag === "None"
            ? fromRepo
            : generatedName())
        const created = yield* create(owner, { name, session_type: "sandbox" }).pipe(
          Effect.catchTag("WorkspaceNotFound", Effect.die)
        )
        const job = yield* jobs.run(
          owner,
          "import",
          { workspace: created.id, url: input.url, ...(input.ref == null ? {} : { ref: input.ref }) },
          { nodeId: null, waitMs: JOB_WAIT_MS }
        )
        if (job.state !== "succeeded") {
          // Nothing half-made stays: the workspace goes with its failed import.
          yield* remove(owner, created.id).pipe(Effect.ignore)
          if (job.error?.code === "import_failed")
            return yield* new ImportFailed({ detail: job.error.message })
          yield* failedJob(job)
        }
        yield* audit.record(owner, {
          action: "workspace.imported",
          targetType: "workspace",
          targetId: created.id,
          details: { url: publicUrl(input.url), job_id: job.id }
        })
        return toWorkspaceInfo(yield* find(owner, created.id))
      })

      return WorkspaceImport.of({ importRepo })
    })
  )
}
