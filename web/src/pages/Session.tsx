import type { RefObject } from "preact"
import { useEffect, useRef, useState } from "preact/hooks"
import { api } from "../api.ts"
import { ErrorText, Loading, PageTitle, Section, StatusBadge } from "../components.tsx"
import { bytes, dateTime } from "../format.ts"
import { useAction, useLoad } from "../hooks.ts"
import { LiveView } from "../LiveView.tsx"
import { can, useMe } from "../me.ts"
import { SessionLog } from "../SessionLog.tsx"
import { Terminal } from "../Terminal.tsx"
import type { Session } from "../types.ts"

const Screenshot = ({ id }: { readonly id: string }) => {
  const [image, setImage] = useState<string>()
  const shot = useAction()
  useEffect(() => () => image && URL.revokeObjectURL(image), [image])
  return (
    <div class="stack">
      <div>
        <button
          type="button"
          disabled={shot.busy}
          onClick={() =>
            void shot.run(async () =>
              setImage(URL.createObjectURL(await api.blob(`/v1/sessions/${id}/screenshot`)))
            )
          }
        >
          {shot.busy ? "Taking screenshot…" : "Take screenshot"}
        </button>
      </div>
      <ErrorText message={shot.error} />
      {image !== undefined && (
        <figure>
          <img class="screen" src={image} alt="Screenshot of the session's page" />
          <figcaption>
            <a href={image} download={`${id}.png`}>
              Download the PNG
            </a>
          </figcaption>
        </figure>
      )}
    </div>
  )
}

const RecordingPanel = ({
  session,
  onChanged,
  video
}: {
  readonly session: Session
  readonly onChanged: () => void
  readonly video: RefObject<HTMLVideoElement | null>
}) => {
  const me = useMe()
  const remove = useAction()
  const recording = session.recording
  if (recording === undefined || recording === null) return null
  return (
    <Section title="Recording">
      {recording.status === "ready" ? (
        <div class="stack">
          <video
            ref={video}
            class="screen"
            controls
            preload="metadata"
            src={recording.url}
            aria-label="Recording of the session"
          />
          <p class="muted">
            {((recording.duration_ms ?? 0) / 1000).toFixed(1)} s · {recording.frames} frames ·{" "}
            {bytes(recording.bytes ?? 0)} · <a href={recording.url}>Download the WebM</a>
          </p>
          {can(me, "write") && (
            <div>
              <button
                type="button"
                class="danger"
                disabled={remove.busy}
                onClick={() =>
                  confirm("Delete this recording for good?") &&
                  void remove.run(() => api.delete(`/v1/sessions/${session.id}/recording`).then(onChanged))
                }
              >
                Delete recording
              </button>
            </div>
          )}
          <ErrorText message={remove.error} />
        </div>
      ) : (
        <p role="status">
          <StatusBadge status={recording.status} />{" "}
          {recording.status === "recording"
            ? "Recording while the session runs; the video is ready a few seconds after it ends."
            : recording.status === "processing"
              ? "Encoding the video…"
              : "The recording could not be made."}
        </p>
      )}
    </Section>
  )
}

export const SessionPage = ({ id }: { readonly id: string }) => {
  const me = useMe()
  const session = useLoad(() => api.get<Session>(`/v1/sessions/${id}`), [id])
  const close = useAction()
  const video = useRef<HTMLVideoElement>(null)
  const data = session.data
  const open = data?.status === "creating" || data?.status === "ready"
  const encoding = data?.recording?.status === "recording" || data?.recording?.status === "processing"
  useEffect(() => {
    if (!open && !encoding) return
    const timer = setInterval(session.reload, open ? 3000 : 1000)
    return () => clearInterval(timer)
  }, [open, encoding])
  return (
    <>
      <PageTitle
        actions={
          open &&
          can(me, "write") && (
            <button
              type="button"
              class="danger"
              disabled={close.busy}
              onClick={() =>
                confirm("End this session? Its browser closes and its egress is billed.") &&
                void close.run(() => api.delete(`/v1/sessions/${id}`).then(session.reload))
              }
            >
              {close.busy ? "Ending…" : "Delete session"}
            </button>
          )
        }
      >
        Session
      </PageTitle>
      <p>
        <a href="#/sessions">← All sessions</a>
      </p>
      <ErrorText message={close.error} />
      {data === undefined ? (
        session.error !== undefined ? (
          <ErrorText message={session.error} />
        ) : (
          <Loading what="the session" />
        )
      ) : (
        <>
          <Section title="Details">
            <dl class="facts">
              <dt>ID</dt>
              <dd class="mono">{data.id}</dd>
              <dt>Status</dt>
              <dd>
                <StatusBadge status={data.status} /> {data.ended_reason ?? ""}
              </dd>
              <dt>{data.session_type === "sandbox" ? "Sandbox" : "Browser"}</dt>
              <dd>{data.device || "starting…"}</dd>
              <dt>Egress</dt>
              <dd>
                {bytes(data.bytes_up)} up · {bytes(data.bytes_down)} down
                {data.proxy_region !== null && ` · region ${data.proxy_region}`}
              </dd>
              <dt>Connections</dt>
              <dd>{data.active_connection_leases ?? 0}</dd>
              <dt>Created</dt>
              <dd>{dateTime(data.created_at)}</dd>
              <dt>{data.ended_at === null ? "Expires" : "Ended"}</dt>
              <dd>{dateTime(data.ended_at ?? data.expires_at)}</dd>
              {data.session_type !== "sandbox" && (
                <>
                  <dt>CDP URL</dt>
                  <dd class="mono break">{data.cdp_url}</dd>
                </>
              )}
            </dl>
          </Section>
          {data.session_type === "sandbox" ? (
            open && (
              <Section title="Terminal">
                {data.status === "ready" ? <Terminal sessionId={data.id} /> : <Loading what="the sandbox" />}
              </Section>
            )
          ) : (
            <Section title="Live view">
              {data.status === "ready" ? (
                <LiveView sessionId={data.id} />
              ) : data.status === "creating" ? (
                <Loading what="the browser" />
              ) : (
                <p role="status">Session ended: {data.ended_reason}</p>
              )}
            </Section>
          )}
          {data.status === "ready" && data.session_type !== "sandbox" && (
            <Section title="Screenshot">
              <Screenshot id={data.id} />
            </Section>
          )}
          <RecordingPanel session={data} onChanged={session.reload} video={video} />
          {data.session_type !== "sandbox" && (
            <Section title="Log">
              <SessionLog
                sessionId={data.id}
                startedAt={data.ready_at}
                onSeek={
                  data.recording?.status === "ready"
                    ? (seconds) => {
                        const player = video.current
                        if (player === null) return
                        player.currentTime = seconds
                        player.scrollIntoView({ block: "nearest" })
                      }
                    : undefined
                }
              />
            </Section>
          )}
        </>
      )}
    </>
  )
}
