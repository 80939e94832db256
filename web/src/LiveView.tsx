import { useEffect, useRef, useState } from "preact/hooks"
import { api } from "./api.ts"
import { ErrorText } from "./components.tsx"
import { messageOf } from "./hooks.ts"

interface FrameMeta {
  readonly seq: number
  readonly width: number
  readonly height: number
  readonly css_width: number
  readonly css_height: number
  readonly url: string
}

/** A page of the session (the stream's `tabs` message). */
interface Tab {
  readonly id: string
  readonly url: string
  readonly title: string
  readonly active: boolean
}

const tabName = (tab: Tab) => tab.title || tab.url || "New tab"

/** The most a paste carries (the service's bound). */
const PASTE_MAX = 100_000

type State =
  | { readonly kind: "connecting" }
  | { readonly kind: "live" }
  | { readonly kind: "ended"; readonly text: string }
  | { readonly kind: "lost"; readonly text: string }

/** DOM key names the service forwards (Tab is left to the dashboard, so the keyboard is never trapped). */
const NAMED_KEYS = new Set([
  "Enter",
  "Backspace",
  "Escape",
  "Delete",
  "ArrowLeft",
  "ArrowRight",
  "ArrowUp",
  "ArrowDown",
  "Home",
  "End",
  "PageUp",
  "PageDown",
  "Insert",
  ...Array.from({ length: 12 }, (_, i) => `F${i + 1}`)
])

const modifiersOf = (e: KeyboardEvent | MouseEvent) =>
  [e.altKey && "Alt", e.ctrlKey && "Control", e.metaKey && "Meta", e.shiftKey && "Shift"].filter(
    (m): m is string => m !== false
  )

/**
 * A session's live view: frames drawn on a canvas as they come (JPEGs, at
 * most 5 a second), clicks, taps, wheel and keys sent back in the page's CSS
 * pixels when the token allows input; the session's tabs (a click puts one on
 * screen), text pasted into the page and its selection copied out. An expired
 * token is replaced at once.
 */
export const LiveView = ({ sessionId }: { readonly sessionId: string }) => {
  const canvas = useRef<HTMLCanvasElement>(null)
  const socket = useRef<WebSocket | undefined>(undefined)
  const meta = useRef<FrameMeta | undefined>(undefined)
  const [state, setState] = useState<State>({ kind: "connecting" })
  const [inputEnabled, setInputEnabled] = useState(false)
  const [frame, setFrame] = useState<FrameMeta>()
  const [attempt, setAttempt] = useState(0)
  const [tabs, setTabs] = useState<ReadonlyArray<Tab>>([])
  const [pasteText, setPasteText] = useState("")
  /** What the last paste or copy came to, and the stream's last refusal. */
  const [notice, setNotice] = useState<string>()
  const [problem, setProblem] = useState<string>()
  /** The page's selection, shown when the browser refused its clipboard. */
  const [selection, setSelection] = useState<string>()

  useEffect(() => {
    let stopped = false
    let drawing = false
    let pending: Blob | undefined
    const draw = async (blob: Blob) => {
      if (drawing) {
        pending = blob
        return
      }
      drawing = true
      try {
        const image = await createImageBitmap(blob)
        const target = canvas.current
        if (target !== null && !stopped) {
          if (target.width !== image.width || target.height !== image.height) {
            target.width = image.width
            target.height = image.height
          }
          target.getContext("2d")?.drawImage(image, 0, 0)
        }
        image.close()
      } finally {
        drawing = false
        const next = pending
        pending = undefined
        if (next !== undefined) void draw(next)
      }
    }
    /** The page's selection as the stream answered a copy: into the clipboard, or shown when refused. */
    const copied = async (text: string, truncated: boolean) => {
      if (text === "") {
        setSelection(undefined)
        return setNotice("Nothing is selected on the page.")
      }
      const cut = truncated ? ` (its first ${text.length.toLocaleString()} characters)` : ""
      try {
        await navigator.clipboard.writeText(text)
        setSelection(undefined)
        setNotice(`Copied the page's selection${cut} to your clipboard.`)
      } catch {
        // No clipboard (an insecure origin) or no permission: shown, for a copy by hand.
        setSelection(text)
        setNotice(`Your browser did not let the dashboard use the clipboard: the selection${cut} is below.`)
      }
    }
    setState({ kind: "connecting" })
    setTabs([])
    api
      .post<{ url: string; input_enabled: boolean }>(`/v1/sessions/${sessionId}/preview-token`, {})
      .then((token) => {
        if (stopped) return
        setInputEnabled(token.input_enabled)
        const ws = new WebSocket(token.url)
        ws.binaryType = "blob"
        socket.current = ws
        ws.onmessage = ({ data }) => {
          if (typeof data !== "string") {
            setState((s) => (s.kind === "live" ? s : { kind: "live" }))
            if (meta.current !== undefined) setFrame(meta.current)
            return void draw(data as Blob)
          }
          const message = JSON.parse(data)
          if (message.type === "frame") meta.current = message
          else if (message.type === "tabs") setTabs(message.tabs)
          else if (message.type === "clipboard") void copied(message.text, message.truncated)
          else if (message.type === "error") setProblem(message.message)
        }
        ws.onclose = ({ code, reason }) => {
          if (stopped) return
          // The token ran out: a new one resumes the stream.
          if (code === 4001) return setAttempt((n) => n + 1)
          if (code === 1000 && reason.startsWith("session ended: ")) {
            return setState({
              kind: "ended",
              text: `Session ended: ${reason.slice("session ended: ".length)}`
            })
          }
          setState({ kind: "lost", text: reason === "" ? "The stream was disconnected." : reason })
        }
      })
      .catch((error) => !stopped && setState({ kind: "lost", text: messageOf(error) }))
    return () => {
      stopped = true
      socket.current?.close()
      socket.current = undefined
    }
  }, [sessionId, attempt])

  const send = (message: object) => {
    if (inputEnabled && socket.current?.readyState === WebSocket.OPEN)
      socket.current.send(JSON.stringify(message))
  }
  /** Sends what the viewer asked for, forgetting what the last ask came to. */
  const ask = (message: object) => {
    setNotice(undefined)
    setProblem(undefined)
    send(message)
  }
  const paste = (text: string) => {
    if (text === "") return
    ask({ type: "paste", text: text.slice(0, PASTE_MAX) })
    setNotice(
      text.length > PASTE_MAX
        ? `Pasted the first ${PASTE_MAX.toLocaleString()} characters into the page.`
        : "Pasted into the page."
    )
  }
  /** A point on the canvas as the page's CSS pixels. */
  const toPage = (clientX: number, clientY: number) => {
    const box = canvas.current!.getBoundingClientRect()
    const page = meta.current
    if (page === undefined || box.width === 0) return undefined
    return {
      x: Math.round(((clientX - box.left) * page.css_width) / box.width),
      y: Math.round(((clientY - box.top) * page.css_height) / box.height)
    }
  }

  const statusText =
    state.kind === "connecting"
      ? "Connecting…"
      : state.kind === "live"
        ? `Live${frame === undefined ? "" : ` · frame ${frame.seq}`}`
        : state.text
  return (
    <div class="liveview">
      <div class="row wrap between">
        <p role="status" class={`stream-state ${state.kind}`}>
          {statusText}
        </p>
        {state.kind === "lost" && (
          <button type="button" class="secondary" onClick={() => setAttempt((n) => n + 1)}>
            Reconnect
          </button>
        )}
      </div>
      {tabs.length > 0 && (
        <ul class="plain tabs" aria-label="Tabs of the session">
          {tabs.map((tab) => (
            <li key={tab.id}>
              {inputEnabled ? (
                <button
                  type="button"
                  class={tab.active ? "tab" : "tab secondary"}
                  aria-current={tab.active ? "true" : undefined}
                  title={tab.url}
                  onClick={() => !tab.active && ask({ type: "switch_tab", id: tab.id })}
                >
                  {tabName(tab)}
                </button>
              ) : (
                <span class="tab" aria-current={tab.active ? "true" : undefined} title={tab.url}>
                  {tabName(tab)}
                </span>
              )}
            </li>
          ))}
        </ul>
      )}
      {frame !== undefined && (
        <p class="muted mono ellipsis" title={frame.url}>
          {frame.url}
        </p>
      )}
      <canvas
        ref={canvas}
        class="screen"
        width={1280}
        height={720}
        tabIndex={0}
        role="application"
        aria-roledescription="remote screen"
        aria-label="Live view of the session"
        aria-describedby="liveview-help"
        onClick={(e) => {
          canvas.current?.focus()
          const at = toPage(e.clientX, e.clientY)
          if (at !== undefined) send({ type: "click", ...at, modifiers: modifiersOf(e) })
        }}
        onContextMenu={(e) => {
          e.preventDefault()
          const at = toPage(e.clientX, e.clientY)
          if (at !== undefined) send({ type: "click", ...at, button: "right" })
        }}
        onWheel={(e) => {
          const at = toPage(e.clientX, e.clientY)
          if (at === undefined || !inputEnabled) return
          e.preventDefault()
          send({ type: "scroll", ...at, dx: Math.round(e.deltaX), dy: Math.round(e.deltaY) })
        }}
        onTouchEnd={(e) => {
          const touch = e.changedTouches[0]
          const at = touch === undefined ? undefined : toPage(touch.clientX, touch.clientY)
          if (at === undefined || !inputEnabled) return
          e.preventDefault()
          send({ type: "tap", ...at })
        }}
        onPaste={(e) => {
          const text = e.clipboardData?.getData("text/plain") ?? ""
          if (!inputEnabled || text === "") return
          e.preventDefault()
          paste(text)
        }}
        onKeyDown={(e) => {
          if (!inputEnabled || e.key === "Tab") return
          // The browser's own paste: its event brings the text of this machine's clipboard (onPaste).
          if ((e.ctrlKey || e.metaKey) && !e.altKey && e.key.toLowerCase() === "v") return
          const named = NAMED_KEYS.has(e.key)
          if (!named && [...e.key].length !== 1) return
          e.preventDefault()
          send({ type: "key", key: e.key, modifiers: modifiersOf(e) })
        }}
      />
      <p id="liveview-help" class="muted">
        {inputEnabled
          ? "Click, scroll or tap the view to interact; while it has focus your keys go to the page (Tab moves on) and a paste types your clipboard into it."
          : "View only: your role cannot drive this session."}
      </p>
      {inputEnabled && (
        <form
          class="row end"
          onSubmit={(e) => {
            e.preventDefault()
            paste(pasteText)
          }}
        >
          <div class="stack grow">
            <label for="liveview-paste">Text to paste into the page</label>
            <textarea
              id="liveview-paste"
              rows={2}
              maxLength={PASTE_MAX}
              value={pasteText}
              onInput={(e) => setPasteText(e.currentTarget.value)}
            />
          </div>
          <button type="submit" disabled={pasteText === ""}>
            Paste into the page
          </button>
          <button type="button" class="secondary" onClick={() => ask({ type: "copy" })}>
            Copy the page's selection
          </button>
        </form>
      )}
      <p role="status" class="muted">
        {notice}
      </p>
      <ErrorText message={problem} />
      {selection !== undefined && (
        <div class="stack">
          <label for="liveview-selection">The page's selection</label>
          <textarea id="liveview-selection" rows={3} readOnly value={selection} />
        </div>
      )}
    </div>
  )
}
