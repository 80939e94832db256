import { Effect } from "effect"
import { type CdpClient, CdpError } from "../../platform/cdp/CdpClient.ts"
import type { Selection } from "../../runtime/Frames.ts"

/**
 * What a person's copy would take: the selection of the focused text field
 * (none of a password field's), else the document's, followed into the
 * same-origin frame that holds the focus. Cut in the page, so a huge selection
 * never crosses CDP whole, and never between the halves of a surrogate pair.
 */
const expression = (max: number) => `(() => {
  const selected = () => {
    let doc = document
    for (let depth = 0; depth < 16; depth++) {
      const el = doc.activeElement
      const tag = el === null ? "" : el.tagName
      if (tag === "INPUT" || tag === "TEXTAREA") {
        if (el.type === "password") return ""
        const start = el.selectionStart
        const end = el.selectionEnd
        return typeof start === "number" && typeof end === "number" ? el.value.slice(start, end) : ""
      }
      const inner = tag === "IFRAME" || tag === "FRAME" ? el.contentDocument : null
      if (inner === null) break
      doc = inner
    }
    const selection = doc.getSelection()
    return selection === null ? "" : selection.toString()
  }
  const text = selected()
  if (text.length <= ${max}) return { text, truncated: false }
  const high = text.charCodeAt(${max - 1})
  return { text: text.slice(0, high >= 0xd800 && high <= 0xdbff ? ${max - 1} : ${max}), truncated: true }
})()`

/**
 * The selection of the page attached as `sessionId`, read in a world of the
 * service's own: the page's scripts do not see the read, and what they put in
 * place of `getSelection` or `value` is not what is called.
 */
export const read = (
  control: CdpClient,
  sessionId: string,
  max: number
): Effect.Effect<Selection, CdpError> =>
  Effect.gen(function* () {
    const { frameTree } = yield* control.send<{ frameTree: { frame: { id: string } } }>(
      "Page.getFrameTree",
      {},
      sessionId
    )
    const { executionContextId } = yield* control.send<{ executionContextId: number }>(
      "Page.createIsolatedWorld",
      { frameId: frameTree.frame.id, worldName: "rbs-live-view-copy" },
      sessionId
    )
    const { result, exceptionDetails } = yield* control.send<{
      result: { value?: Selection }
      exceptionDetails?: { text: string }
    }>(
      "Runtime.evaluate",
      { expression: expression(max), contextId: executionContextId, returnByValue: true },
      sessionId
    )
    if (exceptionDetails !== undefined || result.value === undefined)
      return yield* new CdpError({ message: `reading the selection threw: ${exceptionDetails?.text}` })
    return result.value
  })
