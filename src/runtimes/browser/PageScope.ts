import type { Command, FrameScope, Send } from "../../platform/net/Splice.ts"

/**
 * A client of one page target, as on Chromium's own `/devtools/page/{id}`,
 * served over a connection to the browser's endpoint instead: the relay
 * attaches to the page (flattened) for the client through `inner`, the scope
 * a browser-level client of the session gets (its context's, its
 * identity's), and every command of the client's passes the same guard and
 * the same scope a browser-level client's does. A page connection is no way
 * around them: Chromium's own page endpoint would be (a page's session
 * reaches every context's targets), so the relay never dials it.
 *
 * - The client's commands wait until the page is attached; then one without
 *   a `sessionId` goes in the page's session, and one in a session the
 *   client attached itself (the page's frames and workers) as it is.
 * - The page's session's frames reach the client without their `sessionId`,
 *   its own sessions' as they are, and nothing of the browser level does.
 * - The page going (its session detached), or its attach refused, ends the
 *   connection, as Chromium closes a page client's.
 */

/**
 * The id of the relay's attach: the client's commands wait until it is
 * answered, so none of theirs is in flight beside it.
 */
const ATTACH_ID = 0

/** `,"sessionId":"..."}` ending a frame, where Chromium (and the scopes) write it. */
const TAIL_SESSION = /,"sessionId":"([^"\\]+)"\}\s*$/

const tailOf = (frame: string | Buffer) =>
  TAIL_SESSION.exec(
    typeof frame === "string" ? frame.slice(-160) : frame.toString("latin1", Math.max(0, frame.length - 160))
  )

const CLOSE_BRACE = 0x7d

/**
 * `frame` without the `,"sessionId":"..."` its tail holds (`length`
 * characters, each a byte in latin1, with the brace that ends it). A Buffer
 * is cut where it lies, without a copy: `ws` read it for this splice alone.
 */
const withoutTail = (frame: string | Buffer, length: number) => {
  if (typeof frame === "string") return `${frame.slice(0, frame.length - length)}}`
  frame[frame.length - length] = CLOSE_BRACE
  return frame.subarray(0, frame.length - length + 1)
}

const text = (frame: string | Buffer) => (typeof frame === "string" ? frame : frame.toString("utf8"))

interface Message {
  readonly id?: unknown
  readonly method?: unknown
  readonly params?: { readonly sessionId?: unknown }
  readonly result?: { readonly sessionId?: unknown }
  readonly error?: { readonly message?: unknown }
  readonly sessionId?: unknown
}

/** A scope that changes nothing, under a page client of a session that needs none of its own. */
export const bare: FrameScope = {
  open: () => [],
  fromClient: (command) => [{ to: "upstream", frame: JSON.stringify(command) }],
  fromUpstream: (frame) => [{ to: "client", frame }]
}

export const make = (targetId: string, inner: FrameScope): FrameScope => {
  /** The page's session once attached. */
  let page: string | undefined
  /** The client's commands until then. */
  let waiting: Array<Command> | undefined = []
  let ended: string | undefined

  const inPage = (command: Command): Command =>
    command.sessionId === undefined ? { ...command, sessionId: page! } : command

  /** A frame for the client without a session at its tail: the browser level's, or rarely written otherwise. */
  const unsessioned = (frame: string | Buffer): ReadonlyArray<Send> => {
    let message: Message
    try {
      message = JSON.parse(text(frame)) as Message
    } catch {
      return []
    }
    if (typeof message.sessionId === "string") {
      if (message.sessionId !== page) return [{ to: "client", frame }]
      const { sessionId: _page, ...rest } = message
      return [{ to: "client", frame: JSON.stringify(rest) }]
    }
    if (waiting !== undefined && message.id === ATTACH_ID) {
      const attached = message.result?.sessionId
      if (typeof attached !== "string") {
        ended = `cannot attach to page ${targetId}: ${String(message.error?.message ?? "no session")}`
        return []
      }
      page = attached
      const held = waiting
      waiting = undefined
      return held.flatMap((command) => toClient(inner.fromClient(inPage(command))))
    }
    if (message.method === "Target.detachedFromTarget" && message.params?.sessionId === page)
      ended = "the page was closed"
    return []
  }

  /** What of `sends` reaches the client, and how. */
  const toClient = (sends: ReadonlyArray<Send>): ReadonlyArray<Send> =>
    sends.flatMap((send) => {
      if (send.to !== "client") return [send]
      const tail = tailOf(send.frame)
      if (tail === null) return unsessioned(send.frame)
      if (tail[1] !== page) return [send]
      return [{ to: "client", frame: withoutTail(send.frame, tail[0].length) }]
    })

  return {
    open: () =>
      toClient([
        ...inner.open(),
        ...inner.fromClient({
          id: ATTACH_ID,
          method: "Target.attachToTarget",
          params: { targetId, flatten: true }
        })
      ]),
    fromClient: (command) => {
      if (waiting === undefined) return toClient(inner.fromClient(inPage(command)))
      waiting.push(command)
      return []
    },
    fromUpstream: (frame) => toClient(inner.fromUpstream(frame)),
    ended: () => ended
  }
}
