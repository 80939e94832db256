import type { ComponentChildren } from "preact"
import { useEffect, useRef, useState } from "preact/hooks"

export const Loading = ({ what }: { readonly what: string }) => (
  <p class="muted" role="status">
    Loading {what}…
  </p>
)

export const ErrorText = ({ message }: { readonly message: string | undefined }) =>
  message === undefined ? null : (
    <p class="error" role="alert">
      {message}
    </p>
  )

export const Empty = ({ children }: { readonly children: ComponentChildren }) => (
  <p class="empty">{children}</p>
)

/** One h1 per page, focused when the page opens so screen readers announce it. */
export const PageTitle = ({
  children,
  actions
}: {
  readonly children: string
  readonly actions?: ComponentChildren
}) => {
  const heading = useRef<HTMLHeadingElement>(null)
  useEffect(() => {
    document.title = `${children} · Remote Browser Service`
    heading.current?.focus()
  }, [children])
  return (
    <div class="page-title">
      <h1 tabIndex={-1} ref={heading}>
        {children}
      </h1>
      {actions}
    </div>
  )
}

export const Section = ({
  title,
  children
}: {
  readonly title: string
  readonly children: ComponentChildren
}) => (
  <section class="card" aria-label={title}>
    <h2>{title}</h2>
    {children}
  </section>
)

/**
 * A secret the service shows once (a key, a signing secret): a read-only field
 * labelled "Secret" with a copy button. Once dismissed it is gone from the page.
 */
export const SecretOnce = ({
  title,
  secret,
  onDone
}: {
  readonly title: string
  readonly secret: string
  readonly onDone: () => void
}) => {
  const [copied, setCopied] = useState(false)
  const field = useRef<HTMLInputElement>(null)
  useEffect(() => field.current?.select(), [])
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(secret)
    } catch {
      // No clipboard (an insecure origin): the field is selected for a manual copy.
      field.current?.select()
      document.execCommand?.("copy")
    }
    setCopied(true)
  }
  return (
    <div class="secret" role="region" aria-label={title}>
      <p role="status">
        <strong>{title}.</strong> Copy it now: it is shown this once and you will not see it again.
      </p>
      <label for="secret-value">Secret</label>
      <div class="row">
        <input id="secret-value" ref={field} class="mono grow" readOnly value={secret} />
        <button type="button" onClick={copy}>
          {copied ? "Copied" : "Copy"}
        </button>
      </div>
      <button type="button" class="secondary" onClick={onDone}>
        I have copied it
      </button>
    </div>
  )
}

export const Badge = ({
  tone,
  children
}: {
  readonly tone: string
  readonly children: ComponentChildren
}) => <span class={`badge ${tone}`}>{children}</span>

const STATUS_TONES: Record<string, string> = {
  ready: "good",
  creating: "info",
  closed: "neutral",
  error: "bad",
  succeeded: "good",
  pending: "info",
  delivering: "info",
  failed: "bad",
  discarded: "neutral",
  success: "good",
  failure: "bad",
  recording: "info",
  processing: "info"
}

export const StatusBadge = ({ status }: { readonly status: string }) => (
  <Badge tone={STATUS_TONES[status] ?? "neutral"}>{status}</Badge>
)

/** A table that scrolls sideways on a narrow screen: focusable, so a keyboard can scroll it too. */
export const TableWrap = ({
  label,
  children
}: {
  readonly label: string
  readonly children: ComponentChildren
}) => (
  <div class="table-wrap" tabIndex={0} role="region" aria-label={label}>
    {children}
  </div>
)
