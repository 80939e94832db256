import { useEffect, useRef, useState } from "preact/hooks"
import { api } from "./api.ts"
import { messageOf } from "./hooks.ts"

interface FrameMeta {
  readonly seq: number
  readonly width: number
  readonly height: number
  readonly css_width: number
  readonly css_height: number
  readonly url: string
}

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
 * pixels when the token allows input. An expired token is replaced at once.
 */
export const LiveView = ({ sessionId }: { readonly sessionId: string }) => {
  const canvas = useRef<HTMLCanvasElement>(null)
  const socket = useRef<WebSocket | undefined>(undefined)
  const meta = useRef<FrameMeta | undefined>(undefined)
  const [state, setState] = useState<State>({ kind: "connecting" })
  const [inputEnabled, setInputEnabled] = useState(false)
  const [frame, setFrame] = useState<FrameMeta>()
  const [attempt, setAttempt] = useState(0)

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
    setState({ kind: "connecting" })
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
        onKeyDown={(e) => {
          if (!inputEnabled || e.key === "Tab") return
          const named = NAMED_KEYS.has(e.key)
          if (!named && [...e.key].length !== 1) return
          e.preventDefault()
          send({ type: "key", key: e.key, modifiers: modifiersOf(e) })
        }}
      />
      <p id="liveview-help" class="muted">
        {inputEnabled
          ? "Click, scroll or tap the view to interact; while it has focus your keys go to the page (Tab moves on)."
          : "View only: your role cannot drive this session."}
      </p>
    </div>
  )
}
