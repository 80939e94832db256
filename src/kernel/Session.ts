import { Schema } from "effect"
import { Locale, TimeZone, UserAgent, VIEWPORT_LIMITS, Viewport } from "./BrowserIdentity.ts"
import { RecordingInfo } from "./Recording.ts"
import { EXTENSIONS_PER_SESSION } from "./Extension.ts"
import { SandboxResources, SandboxResourcesRequest } from "./SandboxResources.ts"

export const SessionStatus = Schema.Literals(["creating", "ready", "closed", "error"])
export type SessionStatus = typeof SessionStatus.Type

/**
 * What runs behind a session: a browser (CDP), a sandbox (an OCI container
 * with exec, PTY and files), or a kind a host registers. Which types there
 * are is the registered kinds' (`SessionKinds`): one it does not know is
 * refused where it is used.
 */
export const SessionType = Schema.String.check(Schema.isPattern(/^[a-z][a-z0-9_-]{0,31}$/))
export type SessionType = typeof SessionType.Type

/**
 * How a browser session is kept from others: `browser`, a Chromium of its
 * own; `context`, a fresh browser context in a Chromium that the account's
 * other context sessions share (never another account's).
 */
export const Isolation = Schema.Literals(["browser", "context"])
export type Isolation = typeof Isolation.Type

/** What a node runs for a session, each with its own pool and capacity: `browser`, `context`, `sandbox`, or a kind a host registers. */
export type RuntimeKind = string

export const OPEN_STATUSES: ReadonlyArray<SessionStatus> = ["creating", "ready"]

export const EndedReason = Schema.Literals([
  "client_delete",
  "ttl_expired",
  "browser_crashed",
  "sandbox_crashed",
  "launch_failed",
  "server_restart",
  "bulk_terminate",
  "idle_timeout",
  "node_lost",
  "memory_limit"
])
export type EndedReason = typeof EndedReason.Type

export const TTL_MIN_SECONDS = 60
export const TTL_MAX_SECONDS = 3600
export const TTL_DEFAULT_SECONDS = 1800

/** A session's time to live, in seconds (60 to 3600). */
export const TtlSeconds = Schema.Int.check(
  Schema.isBetween({ minimum: TTL_MIN_SECONDS, maximum: TTL_MAX_SECONDS })
).annotate({ description: `${TTL_MIN_SECONDS} to ${TTL_MAX_SECONDS} seconds` })

/** The bounds of `idle_timeout_seconds`. */
export const IDLE_TIMEOUT_MIN_SECONDS = 10
export const IDLE_TIMEOUT_MAX_SECONDS = 86_400

export const IdleTimeoutSeconds = Schema.Int.check(
  Schema.isBetween({ minimum: IDLE_TIMEOUT_MIN_SECONDS, maximum: IDLE_TIMEOUT_MAX_SECONDS })
).annotate({ description: `${IDLE_TIMEOUT_MIN_SECONDS} to ${IDLE_TIMEOUT_MAX_SECONDS} seconds` })

/** The `profile` label of a new session. */
export const ProfileLabel = Schema.String.check(Schema.isMaxLength(100))

/** The bounds of a session's `metadata`: Stripe's, which callers know. */
export const METADATA_LIMITS = { pairs: 50, keyLength: 40, valueLength: 500 } as const

/** A metadata key: letters, digits, `_`, `-` and `.` (a list filter's `key:value` splits at the first colon). */
export const MetadataKey = Schema.String.check(
  Schema.isPattern(new RegExp(`^[A-Za-z0-9_.-]{1,${METADATA_LIMITS.keyLength}}$`))
)

/** A session's labels: string keys and values, set at create, returned on it, filterable in the list, carried in webhooks. */
export const SessionMetadata = Schema.Record(
  MetadataKey,
  Schema.String.check(Schema.isMaxLength(METADATA_LIMITS.valueLength))
)
  .check(Schema.isMaxProperties(METADATA_LIMITS.pairs))
  .annotate({
    description: `Up to ${METADATA_LIMITS.pairs} pairs; keys of 1 to ${METADATA_LIMITS.keyLength} letters, digits, \`_\`, \`-\` or \`.\`; values strings of at most ${METADATA_LIMITS.valueLength} characters.`
  })
export type SessionMetadata = typeof SessionMetadata.Type

/** Why a caller's own upstream proxy failed a request (`proxy.last_error.reason`). */
export const ProxyFailureReason = Schema.Literals([
  "auth_failed",
  "unreachable",
  "refused",
  "address_refused",
  "error"
])
export type ProxyFailureReason = typeof ProxyFailureReason.Type

/** A caller's own upstream proxy's schemes. */
export const PROXY_SCHEMES = ["http", "https", "socks5"] as const

/** Hosts a session's traffic reaches without its own proxy (`*.example.com`, `example.com`, an address). */
export const ProxyBypassEntry = Schema.String.check(Schema.isPattern(/^(\*\.)?[A-Za-z0-9._:-]{1,253}$/))

/** `proxy` at create: the caller's own upstream, behind the session's metering proxy. */
export const SessionProxyRequest = Schema.Struct({
  server: Schema.String.check(Schema.isMaxLength(300)).annotate({
    description:
      "`http://host:port`, `https://host:port` or `socks5://host:port`: no path, no credentials in it (give them below)."
  }),
  username: Schema.optionalKey(Schema.String.check(Schema.isMaxLength(256))),
  password: Schema.optionalKey(Schema.String.check(Schema.isMaxLength(256))),
  bypass: Schema.optionalKey(
    Schema.Array(ProxyBypassEntry).check(Schema.isMaxLength(100)).annotate({
      description:
        "Hosts reached without the upstream (still through the session's metering proxy and its address policy): `example.com`, `*.example.com` or an address; at most 100."
    })
  )
})
export type SessionProxyRequest = typeof SessionProxyRequest.Type

/** The name of an egress region (`EGRESS_REGIONS`). */
export const RegionName = Schema.String.check(Schema.isPattern(/^[a-z0-9][a-z0-9_-]{0,31}$/))

/** `POST /v1/sessions`: the body over HTTP and the input of `Sessions.create` alike. */
export const CreateSessionRequest = Schema.Struct({
  session_type: Schema.optionalKey(
    SessionType.annotate({
      description:
        "`browser` (the default): a Chromium driven over CDP at `cdp_url`. `sandbox`: an OCI container with a shell, Python, Node, git and curl, driven with exec, its PTY, files and the gateway (`endpoints.control`). Another type is 400 `invalid_field` unless the service was composed with a kind of that name."
    })
  ),
  image: Schema.optionalKey(
    Schema.String.annotate({
      description:
        "A sandbox's image: the name of one of the account's images (`POST /v1/images`, `ready`), or else of an OCI image in the node's image store (`rbs images list`); an account's image shadows the node's of the same name, for that account alone. Default `SANDBOX_IMAGE` (`debian`, always the node's). An unknown image, an account's image not `ready`, or an image for a browser session, is 400 `invalid_field`."
    })
  ),
  resources: Schema.optionalKey(
    SandboxResourcesRequest.annotate({
      description:
        "A sandbox's CPUs, memory, disk and processes (an extension), each field optional (the node's default where absent), each within the operator's maxima: below a field's minimum or past its maximum is 400 `invalid_field` naming it (`resources.memory_mb`). Enforced by the sandbox's own cgroup and disk; a program past `memory_mb` is killed by the kernel (`oom_killed` on its command), and a sandbox whose supervisor is killed for memory ends with `ended_reason` `memory_limit`. On a browser session 400 `invalid_field` `resources`."
    })
  ),
  isolation: Schema.optionalKey(
    Isolation.annotate({
      description:
        "A browser session's isolation (an extension). `browser` (the default): a Chromium of its own. `context`: a fresh browser context in a Chromium that the account's other context sessions share (never another account's), which starts in milliseconds instead of a launch; its CDP connection shows only its own context. A page that escapes Chromium's renderer sandbox could reach the account's other open context sessions. `context` on a sandbox is 400 `invalid_field`."
    })
  ),
  profile: Schema.optionalKey(ProfileLabel),
  ttl_seconds: Schema.optionalKey(TtlSeconds),
  idle_timeout_seconds: Schema.optionalKey(
    IdleTimeoutSeconds.annotate({
      description:
        "Ends the session (`closed`, `ended_reason` `idle_timeout`) once nothing has used it for this long: no CDP client, live-view viewer, PTY, command request or running command (an extension; 10 to 86400). Default `SESSION_IDLE_TIMEOUT_SECONDS` (unset: none); the TTL still ends it first."
    })
  ),
  region: Schema.optionalKey(
    RegionName.annotate({
      description:
        "Egress region (an extension): one of the names in the service's `EGRESS_REGIONS`; default `EGRESS_DEFAULT_REGION`."
    })
  ),
  recording: Schema.optionalKey(
    Schema.Boolean.annotate({
      description:
        "Records the session's screen (its live-view screencast, at most 5 frames a second) into a WebM video, ready at `GET /v1/sessions/{id}/recording` shortly after the session ends (an extension; default false). Browser sessions only: true on a sandbox is 400 `invalid_field`."
    })
  ),
  logs: Schema.optionalKey(
    Schema.Boolean.annotate({
      description:
        "Keeps the session's log: its pages' requests, console messages, errors and navigations, its tabs and its clients, at `GET /v1/sessions/{id}/logs` (and `/logs/stream`, `/har`) while it runs and for `SESSION_LOG_RETENTION_DAYS` after (an extension; default true for browser sessions). False keeps none. True on a sandbox is 400 `invalid_field`."
    })
  ),
  workspace: Schema.optionalKey(
    Schema.String.annotate({
      description:
        "A workspace (name or id) the session runs on: a browser's profile (cookies, local storage, IndexedDB, service workers) kept from one session to the next. One open session per workspace (409 `workspace_conflict`); a template cannot be opened (clone it). The session runs on the node that holds the workspace's disk."
    })
  ),
  persistence: Schema.optionalKey(
    Schema.Boolean.annotate({
      description:
        "On a workspace: keep the session's changes (default: the workspace's `persistence`, true unless set otherwise). False: the session works on a copy dropped when it ends."
    })
  ),
  proxy: Schema.optionalKey(
    SessionProxyRequest.annotate({
      description:
        "The caller's own upstream proxy (an extension): the session's traffic goes page or sandbox -> the session's metering proxy -> this upstream -> the site, so every byte is still metered and billed, and the upstream's address passes the same address policy as any destination. `username` and `password` are sealed at rest and never shown, logged or sent in a webhook; the session shows `proxy.server`, and `proxy_ip` the upstream's host. An upstream that refuses, fails authentication or cannot be reached gives the page a 5xx from the metering proxy (never the direct path). Not with `region`."
    })
  ),
  block_ads: Schema.optionalKey(
    Schema.Boolean.annotate({
      description:
        "The session's egress proxy refuses requests to the hosts of the node's ad and tracker lists (an extension; default false): EasyList and EasyPrivacy, or the operator's `BLOCK_ADS_LISTS`. A refused request costs nothing: nothing leaves, nothing is billed; the page sees the request fail (403 from the proxy). True on a node without any list is 400 `invalid_field`."
    })
  ),
  user_agent: Schema.optionalKey(
    UserAgent.annotate({
      description:
        "The user agent every page, worker and request of the session gives (an extension; printable ASCII, at most 512 characters). `navigator.platform` and the client hints (`navigator.userAgentData`, `Sec-CH-UA*`) follow it: a Chrome or Edge user agent gives its brand, version and platform, any other gives none. Default: a desktop Chromium of the browser's own version. Browser sessions with `isolation: browser` only."
    })
  ),
  locale: Schema.optionalKey(
    Locale.annotate({
      description:
        "The session's language (an extension): a BCP 47 tag such as `de-DE`, given as `navigator.language` and `navigator.languages` in every page and worker, `Intl`'s default locale and the `Accept-Language` header (`de-DE,de;q=0.9`). Default `en-US`. Browser sessions with `isolation: browser` only."
    })
  ),
  timezone: Schema.optionalKey(
    TimeZone.annotate({
      description:
        "The session's time zone (an extension): an IANA name such as `Europe/Berlin`, the JS time zone of every page and worker (`Date`, `Intl.DateTimeFormat`). Default: the node's own. Browser sessions with `isolation: browser` only."
    })
  ),
  viewport: Schema.optionalKey(
    Viewport.annotate({
      description:
        "The page's size (an extension): every window of the session, the first and those a client opens later, as `POST /v1/sessions/{id}/resize` sets it; `device_scale_factor` and `mobile` as a phone or a high-density screen gives them. Default 1280x720 at scale 1. Browser sessions with `isolation: browser` only."
    })
  ),
  extensions: Schema.optionalKey(
    Schema.Array(Schema.String)
      .check(Schema.isMaxLength(EXTENSIONS_PER_SESSION))
      .annotate({
        description: `Extensions its browser loads (an extension): ids from \`POST /v1/extensions\`, at most ${EXTENSIONS_PER_SESSION}, each the account's (another, or one twice, is 400 \`invalid_field\` \`extensions\`). They run in the session's browser and its cell, on a browser launched for the session (not a warm one). Browser sessions with \`isolation: browser\` only.`
      })
  ),
  metadata: Schema.optionalKey(
    SessionMetadata.annotate({
      description: `Labels of the caller's (an extension): up to ${METADATA_LIMITS.pairs} string pairs (keys of 1 to ${METADATA_LIMITS.keyLength} letters, digits, \`_\`, \`-\` or \`.\`; values of at most ${METADATA_LIMITS.valueLength} characters), returned on the session, carried in its webhooks' \`data\`, and found with \`GET /v1/sessions?metadata=key:value\`. Never put secrets here: metadata is shown wherever the session is.`
    })
  )
})
export type CreateSessionRequest = typeof CreateSessionRequest.Type

export const PAGE_SIZE_DEFAULT = 20
const pageSizeChecks = [Schema.isInt(), Schema.isBetween({ minimum: 1, maximum: 100 })] as const

/** A page size of the session list: 1 to 100. */
export const PageSize = Schema.Number.check(...pageSizeChecks)

/** The same bound for a page size given as a query string. */
export const PageSizeFromString = Schema.FiniteFromString.check(...pageSizeChecks)

/** `GET /v1/sessions`: the query over HTTP (limit already a number) and the input of `Sessions.list`. */
export const ListSessionsRequest = Schema.Struct({
  limit: Schema.optionalKey(PageSize),
  cursor: Schema.optionalKey(Schema.String),
  /** Only sessions whose metadata holds each `key:value` pair. */
  metadata: Schema.optionalKey(Schema.Array(Schema.String))
})
export type ListSessionsRequest = typeof ListSessionsRequest.Type

/** The create response. */
export const SessionCreated = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("session"),
  status: SessionStatus,
  cdp_url: Schema.NullOr(Schema.String).annotate({
    description: "The browser's CDP WebSocket; null for a sandbox (it has none)."
  }),
  created_at: Schema.DateFromString,
  expires_at: Schema.DateFromString
})
export type SessionCreated = typeof SessionCreated.Type

/**
 * Get and list: every field of a session, one shape for both readers (the list and
 * the single session), so neither misses what the other has.
 */
export const Session = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("session"),
  session_type: SessionType,
  isolation: Isolation.annotate({
    description:
      "A browser session's isolation: `browser` (a Chromium of its own) or `context`; `browser` for a sandbox."
  }),
  status: SessionStatus,
  image: Schema.NullOr(Schema.String).annotate({
    description: "A sandbox's OCI image (`rbs images list`); null for a browser session."
  }),
  device: Schema.String.annotate({
    description:
      "What runs, e.g. `Chromium 156 headless, 1280x720` or `sandbox debian, 1 CPU, 1024 MB` (its `resources`); empty until the session is ready."
  }),
  resources: Schema.NullOr(SandboxResources).annotate({
    description:
      "A sandbox's CPUs, memory, disk and processes, as given at create or the node's defaults then; null for a browser session (and for a sandbox that ended before they were recorded)."
  }),
  cdp_url: Schema.NullOr(Schema.String).annotate({
    description: "The browser's CDP WebSocket; null for a sandbox (it has none)."
  }),
  endpoints: Schema.Struct({
    control: Schema.String.annotate({
      description:
        "A browser's CDP WebSocket (as `cdp_url`); a sandbox's gateway, `{PUBLIC_URL}/s/{id}/`: append a port its programs listen on (`/s/{id}/8000/`)."
    }),
    video: Schema.NullOr(Schema.String)
  }),
  bytes_up: Schema.Number,
  bytes_down: Schema.Number,
  proxy_ip: Schema.NullOr(Schema.String),
  proxy_region: Schema.NullOr(Schema.String),
  created_at: Schema.DateFromString,
  ready_at: Schema.NullOr(Schema.DateFromString),
  expires_at: Schema.DateFromString,
  ended_at: Schema.NullOr(Schema.DateFromString),
  ended_reason: Schema.NullOr(EndedReason),
  active_connection_leases: Schema.NullOr(Schema.Number),
  idle_timeout_seconds: Schema.NullOr(Schema.Number).annotate({
    description:
      "Seconds without a client, viewer, PTY or command after which the session ends `idle_timeout`; null: never."
  }),
  persistence: Schema.NullOr(Schema.Boolean),
  workspace_id: Schema.NullOr(Schema.String),
  recording: Schema.NullOr(RecordingInfo),
  logs: Schema.Boolean.annotate({
    description: "Whether the session keeps a log (`GET /v1/sessions/{id}/logs`)."
  }),
  block_ads: Schema.Boolean.annotate({ description: "Whether its proxy refuses ad and tracker hosts." }),
  proxy: Schema.NullOr(
    Schema.Struct({
      server: Schema.String,
      bypass: Schema.Array(Schema.String),
      last_error: Schema.NullOr(
        Schema.Struct({
          reason: ProxyFailureReason,
          status: Schema.Number,
          at: Schema.String,
          failures: Schema.Number
        })
      ).annotate({
        description:
          "The last request the upstream failed, null while none has: `reason` `auth_failed` (it refused the credentials; the page got 597), `unreachable` (no connection, or it dropped it; 594 to 596, or 502 when its name has no address), `refused` (it answered a CONNECT with another status; 590), `address_refused` (its address is one the service's policy refuses; 403) or `error` (599); `status` what the page got, `at` when, `failures` how many requests it failed so far. Written with the session's figures, about once a second."
      })
    })
  ).annotate({ description: "The caller's own upstream proxy, without its credentials; null: none." }),
  metadata: SessionMetadata.annotate({ description: "The labels given at create; `{}` when none." }),
  extensions: Schema.Array(Schema.String).annotate({
    description: "The extensions its browser loads; `[]` when none."
  }),
  user_agent: Schema.NullOr(Schema.String).annotate({
    description:
      "The user agent given at create; null: the default (a desktop Chromium of the browser's version)."
  }),
  locale: Schema.NullOr(Schema.String).annotate({
    description: "The locale given at create, in its canonical form; null: the default (`en-US`)."
  }),
  timezone: Schema.NullOr(Schema.String).annotate({
    description: "The time zone given at create; null: the node's own."
  }),
  viewport: Schema.NullOr(Viewport).annotate({
    description: "The viewport given at create; null: the default (1280x720, scale 1)."
  })
})
export type Session = typeof Session.Type

export const SessionList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(Session),
  next_cursor: Schema.NullOr(Schema.String),
  has_more: Schema.Boolean
})
export type SessionList = typeof SessionList.Type

export const PreviewToken = Schema.Struct({
  url: Schema.String,
  expires_at: Schema.DateFromString,
  input_enabled: Schema.Boolean,
  fps: Schema.Number
})
export type PreviewToken = typeof PreviewToken.Type

export { VIEWPORT_LIMITS } from "./BrowserIdentity.ts"

/** `POST /v1/sessions/{id}/resize` of a browser: the viewport in CSS pixels. */
export const ResizeRequest = Schema.Struct({
  cols: Schema.Int.check(Schema.isBetween(VIEWPORT_LIMITS.cols)),
  rows: Schema.Int.check(Schema.isBetween(VIEWPORT_LIMITS.rows))
})
export type ResizeRequest = typeof ResizeRequest.Type

/** Bounds of a sandbox's terminal, in character cells. */
export const TERMINAL_LIMITS = {
  cols: { minimum: 1, maximum: 1000 },
  rows: { minimum: 1, maximum: 500 }
} as const

/** `POST /v1/sessions/{id}/resize` of a sandbox: its PTYs, in cells. */
export const TerminalSize = Schema.Struct({
  cols: Schema.Int.check(Schema.isBetween(TERMINAL_LIMITS.cols)),
  rows: Schema.Int.check(Schema.isBetween(TERMINAL_LIMITS.rows))
})
