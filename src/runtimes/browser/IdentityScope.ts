import type { Command, FrameScope, Send } from "../../platform/net/Splice.ts"

/**
 * A browser session's relay when its identity sets the user agent: each page
 * or frame the client attaches to is given the session's user agent override
 * (`navigator.platform`, the client hints) in the client's own session, before
 * the client hears of it. Chromium keeps the override of the page's last
 * attached session alone: without this, a client's attach would undo the one
 * the service set on the page (measured on Chromium 156). A client that sets
 * its own afterwards has its own.
 */

/** The first of the relay's own command ids: a client's from here up are refused. */
export const OWN_IDS = 2 ** 30
const OWN_IDS_END = 2 ** 31 - 1

const ATTACHED_HEAD = '{"method":"Target.attachedToTarget"'
const RESPONSE_ID = /^\{"id":(\d+)[,}]/

const head = (frame: string | Buffer, length: number) =>
  typeof frame === "string" ? frame.slice(0, length) : frame.toString("latin1", 0, length)

const text = (frame: string | Buffer) => (typeof frame === "string" ? frame : frame.toString("utf8"))

export const make = (override: object): FrameScope => {
  let next = OWN_IDS
  const own = () => {
    const id = next
    next = next >= OWN_IDS_END ? OWN_IDS : next + 1
    return id
  }
  return {
    open: () => [],
    fromClient: (command: Command): ReadonlyArray<Send> =>
      command.id >= OWN_IDS
        ? [
            {
              to: "client",
              frame: JSON.stringify({
                id: command.id,
                error: {
                  code: -32000,
                  message: `Refused by the service: command ids from ${OWN_IDS} up are the service's own.`
                },
                ...(command.sessionId === undefined ? {} : { sessionId: command.sessionId })
              })
            }
          ]
        : [{ to: "upstream", frame: JSON.stringify(command) }],
    fromUpstream: (frame): ReadonlyArray<Send> => {
      const start = head(frame, ATTACHED_HEAD.length)
      if (start === ATTACHED_HEAD) {
        const event = JSON.parse(text(frame)) as {
          params?: { sessionId?: string; targetInfo?: { type?: string } }
        }
        const type = event.params?.targetInfo?.type
        const sessionId = event.params?.sessionId
        if ((type === "page" || type === "iframe") && typeof sessionId === "string")
          return [
            {
              to: "upstream",
              frame: JSON.stringify({
                id: own(),
                method: "Emulation.setUserAgentOverride",
                params: override,
                sessionId
              })
            },
            { to: "client", frame }
          ]
        return [{ to: "client", frame }]
      }
      // The answers to its own commands are the relay's.
      const id = RESPONSE_ID.exec(start)?.[1]
      if (id !== undefined && Number(id) >= OWN_IDS) return []
      return [{ to: "client", frame }]
    }
  }
}
