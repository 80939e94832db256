import { Schema } from "effect"
import { ComputerAction } from "../kernel/Computer.ts"

/**
 * What the service itself does to a live browser session's page for a caller
 * without a CDP client of its own (the MCP tools): load a URL, read its text,
 * click, type, evaluate. Each runs on the session's page in front, over the
 * browser's own control connection, on the node that runs the session.
 */
export const PageAction = Schema.Union([
  Schema.TaggedStruct("Navigate", { url: Schema.String, waitMs: Schema.Int }),
  Schema.TaggedStruct("Text", {}),
  Schema.TaggedStruct("Click", { selector: Schema.String }),
  Schema.TaggedStruct("Type", { selector: Schema.String, text: Schema.String }),
  Schema.TaggedStruct("Evaluate", { expression: Schema.String }),
  /** Computer-use input by viewport coordinates (`ComputerActions`), with at most one screenshot at `scale`. */
  Schema.TaggedStruct("Computer", { actions: Schema.Array(ComputerAction), scale: Schema.Finite })
])
export type PageAction = typeof PageAction.Type

/**
 * The page refused the action: a navigation Chromium could not complete, no
 * element for a selector, an expression that threw. The caller's mistake or
 * the page's, never the service's: the session lives on.
 */
export class PageActionFailed extends Schema.TaggedError<PageActionFailed>()("PageActionFailed", {
  reason: Schema.Literals(["navigation_failed", "element_not_found", "evaluation_failed", "out_of_viewport"]),
  detail: Schema.String
}) {
  readonly status = 422
  get code() {
    return this.reason
  }
  override get message() {
    return this.detail
  }
}

/** The most a text read returns, in characters; longer text is cut and says so. */
export const MAX_TEXT_CHARS = 200_000
