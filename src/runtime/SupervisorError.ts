/** The supervisor refused an operation, or went away during it; the message is its own. */
export class SupervisorError extends Error {
  override readonly name = "SupervisorError"
}
