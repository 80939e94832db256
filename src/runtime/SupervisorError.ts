import { Schema } from "effect"

/** What an operation on a sandbox fails with once its supervisor is gone. */
export const SANDBOX_ENDED = "the sandbox has ended"

/** The supervisor refused an operation, or went away during it; the message is its own. */
export class SupervisorError extends Schema.TaggedError<SupervisorError>()("SupervisorError", {
  message: Schema.String,
  cause: Schema.optional(Schema.Defect())
}) {
  /** The sandbox went away, rather than its supervisor refusing what was asked. */
  get sandboxEnded(): boolean {
    return this.message === SANDBOX_ENDED
  }

  /** The errno's name a file system call's refusal starts with (`ENOENT`), if it has one. */
  get errno(): string | undefined {
    return /^(E[A-Z0-9]+) /.exec(this.message)?.[1]
  }

  static ended(): SupervisorError {
    return new SupervisorError({ message: SANDBOX_ENDED })
  }
}
