import { useEffect, useRef, useState } from "preact/hooks"
import { activeAccount, api } from "./api.ts"
import { messageOf } from "./hooks.ts"

type State =
  | { readonly kind: "connecting" }
  | { readonly kind: "connected" }
  | { readonly kind: "closed"; readonly text: string }

/** How long the size has to stay put before the PTY is told: a drag of the window sends one resize. */
const RESIZE_DELAY_MS = 150

/** The text shown for a close: the shell's exit, the session's end, or a lost connection. */
const closeText = (
  code: number,
  reason: string,
  opened: boolean,
  exit: { exit_code: number | null; signal: string | null } | undefined
) => {
  if (exit !== undefined) {
    return exit.signal === null
      ? `Closed: the shell exited with code ${exit.exit_code}.`
      : `Closed: the shell was ended by ${exit.signal}.`
  }
  if (code === 1000 && reason.startsWith("session ended: "))
    return `Closed: session ended (${reason.slice("session ended: ".length)}).`
  if (!opened) return "Closed: the terminal could not be opened."
  return `Closed: ${reason === "" ? "the connection was lost" : reason}.`
}

/**
 * Opens xterm.js under the dashboard's Content-Security-Policy (`style-src
 * 'self'`). Its DOM renderer writes the theme and the cell size into <style>
 * elements it makes while opening, which the policy refuses: the text would
 * be unstyled (page-coloured on the terminal's dark ground). For the length
 * of `open` those elements are inert <template>s whose text becomes
 * constructed stylesheets instead (CSSOM, which the policy does not govern).
 * Returns what takes the sheets away again.
 */
const openStyled = (term: { open: (parent: HTMLElement) => void }, container: HTMLElement) => {
  const sheets: Array<CSSStyleSheet> = []
  const standIn = () => {
    const sheet = new CSSStyleSheet()
    sheets.push(sheet)
    document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet]
    const element = Document.prototype.createElement.call(document, "template")
    let css = ""
    Object.defineProperty(element, "textContent", {
      get: () => css,
      set: (text: string) => {
        css = text
        sheet.replaceSync(text)
      }
    })
    return element
  }
  Object.defineProperty(document, "createElement", {
    configurable: true,
    value: (tag: string, options?: ElementCreationOptions) =>
      tag.toLowerCase() === "style"
        ? standIn()
        : Document.prototype.createElement.call(document, tag, options)
  })
  try {
    term.open(container)
  } finally {
    Reflect.deleteProperty(document, "createElement")
  }
  return () => {
    document.adoptedStyleSheets = document.adoptedStyleSheets.filter((sheet) => !sheets.includes(sheet))
  }
}

/**
 * A sandbox's shell in xterm.js, over `GET /v1/sessions/{id}/pty` (the
 * dashboard cookie is enough: the socket is same-origin). Keys go to the
 * shell as typed; the terminal follows its box, and each new size is posted
 * to `.../resize`, which sizes every PTY of the session.
 */
export const Terminal = ({ sessionId }: { readonly sessionId: string }) => {
  const box = useRef<HTMLDivElement>(null)
  const [state, setState] = useState<State>({ kind: "connecting" })
  const [resizeError, setResizeError] = useState<string>()
  const [attempt, setAttempt] = useState(0)

  useEffect(() => {
    let stopped = false
    let dispose = () => {}
    setState({ kind: "connecting" })
    setResizeError(undefined)
    // xterm.js is loaded with this component only, as uPlot is with the usage page.
    Promise.all([import("@xterm/xterm"), import("@xterm/addon-fit"), import("@xterm/xterm/css/xterm.css")])
      .then(([{ Terminal: XTerm }, { FitAddon }]) => {
        const container = box.current
        if (stopped || container === null) return
        const term = new XTerm({
          fontFamily: 'ui-monospace, "SFMono-Regular", Menlo, Consolas, "Liberation Mono", monospace',
          fontSize: 14,
          scrollback: 5000,
          theme: { background: "#101418", foreground: "#e6e8eb", cursor: "#e6e8eb" }
        })
        const fit = new FitAddon()
        term.loadAddon(fit)
        const unstyle = openStyled(term, container)
        // Tab completes in the shell; Shift+Tab is left to the browser, so the keyboard can always leave.
        term.attachCustomKeyEventHandler((e) => !(e.key === "Tab" && e.shiftKey))
        fit.fit()

        const url = new URL(`/v1/sessions/${sessionId}/pty`, location.href)
        url.protocol = location.protocol === "https:" ? "wss:" : "ws:"
        const params = new URLSearchParams({ cols: String(term.cols), rows: String(term.rows) })
        // A WebSocket carries no header of ours: the active account goes in the query.
        const account = activeAccount()
        if (account !== null) params.set("account", account)
        url.search = `?${params}`
        const ws = new WebSocket(url)
        ws.binaryType = "arraybuffer"
        let opened = false
        let exit: { exit_code: number | null; signal: string | null } | undefined
        ws.onopen = () => {
          opened = true
          setState({ kind: "connected" })
        }
        ws.onmessage = ({ data }) => {
          if (typeof data !== "string") return term.write(new Uint8Array(data as ArrayBuffer))
          const message = JSON.parse(data)
          if (message.type === "exit") exit = message
        }
        ws.onclose = ({ code, reason }) => {
          if (!stopped) setState({ kind: "closed", text: closeText(code, reason, opened, exit) })
        }
        const send = (data: string | Uint8Array<ArrayBuffer>) => {
          if (ws.readyState === WebSocket.OPEN) ws.send(data)
        }
        const typed = term.onData((data) => send(data))
        // Mouse reports in some modes come as bytes in a string, one per character.
        const bytes = term.onBinary((data) => send(Uint8Array.from(data, (c) => c.charCodeAt(0) & 0xff)))

        let timer: ReturnType<typeof setTimeout> | undefined
        const resized = term.onResize(({ cols, rows }) => {
          clearTimeout(timer)
          timer = setTimeout(() => {
            api.post(`/v1/sessions/${sessionId}/resize`, { cols, rows }).then(
              () => !stopped && setResizeError(undefined),
              (error) => !stopped && setResizeError(`The terminal could not be resized: ${messageOf(error)}`)
            )
          }, RESIZE_DELAY_MS)
        })
        const observer = new ResizeObserver(() => fit.fit())
        observer.observe(container)

        dispose = () => {
          observer.disconnect()
          clearTimeout(timer)
          typed.dispose()
          bytes.dispose()
          resized.dispose()
          ws.onclose = null
          ws.close()
          term.dispose()
          unstyle()
        }
      })
      .catch((error) => !stopped && setState({ kind: "closed", text: `Closed: ${messageOf(error)}` }))
    return () => {
      stopped = true
      dispose()
    }
  }, [sessionId, attempt])

  const statusText =
    state.kind === "connecting" ? "Connecting…" : state.kind === "connected" ? "Connected" : state.text
  return (
    <div class="terminal stack">
      <div class="row wrap between">
        <p role="status" class={`stream-state ${state.kind}`}>
          {statusText}
        </p>
        {state.kind === "closed" && (
          <button type="button" class="secondary" onClick={() => setAttempt((n) => n + 1)}>
            Reconnect
          </button>
        )}
      </div>
      {resizeError !== undefined && (
        <p class="error" role="alert">
          {resizeError}
        </p>
      )}
      <div
        ref={box}
        class="terminal-screen"
        role="region"
        aria-label="Terminal of the session"
        aria-describedby="terminal-help"
      />
      <p id="terminal-help" class="muted">
        Click the terminal to type: your keys go to the shell, Tab included (Shift+Tab moves on).
      </p>
    </div>
  )
}
