import { Effect, Schema } from "effect"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import * as DataDir from "../../platform/files/DataDir.ts"
import * as Cdp from "../../platform/cdp/CdpClient.ts"
import * as PageLoad from "../../platform/cdp/PageLoad.ts"
import { Sessions } from "../sessions/Sessions.ts"
import { JobFailed, jobKind, type JobRun } from "./JobKind.ts"
import { type DiskNode, freshSession, onDiskNode, WorkspaceNodes } from "./JobSession.ts"

const PageUrl = Schema.String.check(
  Schema.makeFilter((url) => {
    try {
      const parsed = new URL(url)
      return parsed.protocol === "http:" || parsed.protocol === "https:"
    } catch {
      return false
    }
  })
).annotate({
  description: "The page to load: an http or https URL, reached through the session's egress proxy."
})

const Viewport = Schema.Struct({
  width: Schema.Int.check(Schema.isBetween({ minimum: 100, maximum: 3840 })),
  height: Schema.Int.check(Schema.isBetween({ minimum: 100, maximum: 2160 }))
}).annotate({ description: "CSS pixels; default 1280 x 800." })

const pageFields = {
  url: PageUrl,
  workspace: Schema.optionalKey(
    Schema.String.annotate({
      description:
        "A browser workspace (name or id) to load the page in: its profile's cookies and storage (a login) apply, and what the page changes is kept. Default: a fresh profile."
    })
  ),
  wait_ms: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 30_000 })).annotate({
      description: "Waits this long after the page's load event (scripts that render late); default 0."
    })
  ),
  timeout_seconds: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: 5, maximum: 300 })).annotate({
      description: "Time limit of an attempt, from the session's creation; default 60."
    })
  )
}

const ScreenshotInput = Schema.Struct({
  ...pageFields,
  viewport: Schema.optionalKey(Viewport),
  full_page: Schema.optionalKey(
    Schema.Boolean.annotate({ description: "The whole page (up to 16,384 px tall), not the viewport." })
  ),
  format: Schema.optionalKey(Schema.Literals(["png", "jpeg"])),
  quality: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 100 })).annotate({
      description: "JPEG quality; default 80."
    })
  )
})

/** Paper sizes in inches (width x height, portrait). */
const PAPER = {
  letter: [8.5, 11],
  legal: [8.5, 14],
  tabloid: [11, 17],
  a3: [11.69, 16.54],
  a4: [8.27, 11.69],
  a5: [5.83, 8.27]
} as const

const PdfInput = Schema.Struct({
  ...pageFields,
  paper: Schema.optionalKey(Schema.Literals(Object.keys(PAPER) as Array<keyof typeof PAPER>)),
  landscape: Schema.optionalKey(Schema.Boolean),
  print_background: Schema.optionalKey(Schema.Boolean)
})

const ContentInput = Schema.Struct(pageFields)

const DEFAULT_VIEWPORT = { width: 1280, height: 800 }
const MAX_FULL_PAGE_HEIGHT = 16_384
const timeoutOf = (input: { readonly timeout_seconds?: number }) => input.timeout_seconds ?? 60

/**
 * Loads `url` in the session's tab (`PageLoad.load`). A navigation Chromium
 * refuses (DNS, the egress guard, TLS) fails the attempt for good: the next
 * one would meet the same.
 */
const load = (client: Cdp.CdpClient, sessionId: string, url: string, waitMs: number) =>
  PageLoad.load(client, sessionId, url, waitMs).pipe(
    Effect.catchTag("NavigationFailed", (error) =>
      Effect.fail(new JobFailed({ code: "navigation_failed", detail: error.message, retryable: false }))
    )
  )

/** The browser, or the work on what it answered, failed: the attempt is tried again. */
const browserFailed = (error: unknown) =>
  new JobFailed({ code: "runtime_failed", detail: `The browser failed: ${String(error)}`, retryable: true })

/**
 * A fresh browser session on this node, its first tab, and `f` run on it
 * over the service's own CDP connection to the browser.
 */
const inTab = <A>(
  sessions: Sessions["Service"],
  diskNode: DiskNode,
  run: JobRun,
  workspace: string | undefined,
  f: (client: Cdp.CdpClient, sessionId: string) => Effect.Effect<A, JobFailed | Cdp.CdpError>
) =>
  Effect.gen(function* () {
    // On a workspace: run where its disk is (the job may have been queued before it had one).
    if (workspace !== undefined) yield* onDiskNode(diskNode, run, workspace)
    const { runtime } = yield* freshSession(sessions, run, "cdp", {
      session_type: "browser",
      ...(workspace === undefined ? {} : { workspace })
    })
    const client = yield* Cdp.connect(runtime.cdp.endpoint).pipe(
      Effect.mapError(
        (error) =>
          new JobFailed({
            code: "runtime_failed",
            // The socket's own error when it had one, as it has always been said.
            detail: `CDP connect failed: ${String(error.cause ?? error)}`,
            retryable: true
          })
      )
    )
    return yield* Effect.gen(function* () {
      const pages = yield* Cdp.pageTargets(client)
      const targetId =
        pages[0]?.targetId ??
        (yield* client.send<{ targetId: string }>("Target.createTarget", { url: "about:blank" })).targetId
      return yield* Cdp.withPageSession(client, targetId, (sessionId) => f(client, sessionId))
    }).pipe(Effect.catchTag("CdpError", (error) => Effect.fail(browserFailed(error))))
  })

const writeResult = (run: JobRun, name: string, bytes: Uint8Array) =>
  Effect.tryPromise({
    try: async () => {
      const path = Path.join(run.workDir, name)
      await Fs.writeFile(path, bytes, { mode: DataDir.PRIVATE_FILE })
      return path
    },
    catch: browserFailed
  })

/** `screenshot`, `pdf` and `content`: a page loaded in a fresh browser session, and what it shows. */
const browserJobKinds = (sessions: Sessions["Service"], diskNode: DiskNode) => [
  jobKind({
    kind: "screenshot",
    description:
      "Loads `url` in a fresh browser session and captures it as PNG (or JPEG): the viewport, or the whole page with `full_page`. Result: `{ url, status, width, height }`; the image at `result_url`.",
    input: ScreenshotInput,
    requires: ["sessions.write"],
    runtime: "browser",
    workspace: (input) => input.workspace,
    timeoutSeconds: timeoutOf,
    run: (input, run) =>
      inTab(sessions, diskNode, run, input.workspace, (client, sessionId) =>
        Effect.gen(function* () {
          const viewport = input.viewport ?? DEFAULT_VIEWPORT
          yield* client.send(
            "Emulation.setDeviceMetricsOverride",
            { ...viewport, deviceScaleFactor: 1, mobile: false },
            sessionId
          )
          const loaded = yield* load(client, sessionId, input.url, input.wait_ms ?? 0)
          let size = viewport
          if (input.full_page === true) {
            const metrics = yield* client.send<{ cssContentSize: { width: number; height: number } }>(
              "Page.getLayoutMetrics",
              {},
              sessionId
            )
            size = {
              width: Math.max(viewport.width, Math.ceil(metrics.cssContentSize.width)),
              height: Math.min(MAX_FULL_PAGE_HEIGHT, Math.ceil(metrics.cssContentSize.height))
            }
          }
          const format = input.format ?? "png"
          const { data } = yield* client.send<{ data: string }>(
            "Page.captureScreenshot",
            {
              format,
              ...(format === "jpeg" ? { quality: input.quality ?? 80 } : {}),
              ...(input.full_page === true
                ? { captureBeyondViewport: true, clip: { x: 0, y: 0, ...size, scale: 1 } }
                : {})
            },
            sessionId
          )
          const path = yield* writeResult(run, `screenshot.${format}`, Buffer.from(data, "base64"))
          return {
            result: { ...loaded, width: size.width, height: size.height },
            file: { path, contentType: `image/${format}` }
          }
        })
      )
  }),
  jobKind({
    kind: "pdf",
    description:
      "Loads `url` in a fresh browser session and prints it to PDF (`paper`: letter, legal, tabloid, a3, a4, a5; default letter). Result: `{ url, status }`; the PDF at `result_url`.",
    input: PdfInput,
    requires: ["sessions.write"],
    runtime: "browser",
    workspace: (input) => input.workspace,
    timeoutSeconds: timeoutOf,
    run: (input, run) =>
      inTab(sessions, diskNode, run, input.workspace, (client, sessionId) =>
        Effect.gen(function* () {
          const loaded = yield* load(client, sessionId, input.url, input.wait_ms ?? 0)
          const [width, height] = PAPER[input.paper ?? "letter"]
          const { data } = yield* client.send<{ data: string }>(
            "Page.printToPDF",
            {
              paperWidth: width,
              paperHeight: height,
              landscape: input.landscape ?? false,
              printBackground: input.print_background ?? false
            },
            sessionId
          )
          const path = yield* writeResult(run, "page.pdf", Buffer.from(data, "base64"))
          return { result: loaded, file: { path, contentType: "application/pdf" } }
        })
      )
  }),
  jobKind({
    kind: "content",
    description:
      "Loads `url` in a fresh browser session (scripts run) and reads what it became. Result: `{ url, status, title, text }` (`text`: the body's rendered text, up to 1 MiB); the final HTML at `result_url`.",
    input: ContentInput,
    requires: ["sessions.write"],
    runtime: "browser",
    workspace: (input) => input.workspace,
    timeoutSeconds: timeoutOf,
    run: (input, run) =>
      inTab(sessions, diskNode, run, input.workspace, (client, sessionId) =>
        Effect.gen(function* () {
          const loaded = yield* load(client, sessionId, input.url, input.wait_ms ?? 0)
          const { result } = yield* client.send<{ result: { value?: string } }>(
            "Runtime.evaluate",
            {
              expression:
                "JSON.stringify({ title: document.title, text: document.body ? document.body.innerText : '', html: '<!DOCTYPE html>' + document.documentElement.outerHTML })",
              returnByValue: true
            },
            sessionId
          )
          const page = yield* Effect.try({
            try: () => JSON.parse(result.value ?? "{}") as { title?: string; text?: string; html?: string },
            catch: browserFailed
          })
          const path = yield* writeResult(run, "page.html", Buffer.from(page.html ?? ""))
          return {
            result: { ...loaded, title: page.title ?? "", text: (page.text ?? "").slice(0, 1024 * 1024) },
            file: { path, contentType: "text/html; charset=utf-8" }
          }
        })
      )
  })
]

/** `screenshot`, `pdf` and `content`: each in a fresh browser session on the claiming node. */
export const kinds = Effect.gen(function* () {
  const sessions = yield* Sessions
  const { diskNode } = yield* WorkspaceNodes
  return browserJobKinds(sessions, diskNode)
})
