import { Effect, Schema } from "effect"
import { InvalidField } from "../../kernel/Errors.ts"
import type { RecordingInfo } from "../../kernel/Recording.ts"
import { METADATA_LIMITS, MetadataKey, type Session } from "../../kernel/Session.ts"
import type { KindDescriptor, SessionUrls } from "../../runtime/SessionKinds.ts"
import * as SessionProxy from "./SessionProxy.ts"
import type { Cursor, SessionRow } from "./SessionsRepo.ts"

/** A session row as GET and list show it: the superset of the interface's session shapes, its endpoints as its kind shows them. */
export const toView = (
  row: SessionRow,
  kind: KindDescriptor,
  live: SessionUrls & {
    readonly leases: number
    readonly recording: RecordingInfo | null
  }
): Session => {
  const endpoints = kind.endpoints(live, row.status)
  return {
    id: row.id,
    object: "session",
    session_type: row.session_type,
    isolation: row.isolation,
    status: row.status,
    image: row.image,
    device: row.device,
    resources: row.resources,
    cdp_url: endpoints.cdp_url,
    endpoints: { control: endpoints.control, video: endpoints.video },
    bytes_up: Number(row.bytes_up),
    bytes_down: Number(row.bytes_down),
    proxy_ip: row.proxy_ip,
    proxy_region: row.proxy_region,
    created_at: row.created_at,
    ready_at: row.ready_at,
    expires_at: row.expires_at,
    ended_at: row.ended_at,
    ended_reason: row.ended_reason,
    idle_timeout_seconds: row.idle_timeout_seconds,
    active_connection_leases: live.leases,
    persistence: row.persistence,
    workspace_id: row.workspace_id,
    recording: live.recording,
    logs: row.logs,
    metadata: row.metadata,
    block_ads: row.block_ads,
    proxy: SessionProxy.toView(row.proxy, row.proxy_error),
    extensions: row.extension_ids,
    user_agent: row.identity?.user_agent ?? null,
    locale: row.identity?.locale ?? null,
    timezone: row.identity?.timezone ?? null,
    viewport: row.identity?.viewport ?? null
  }
}

/**
 * The list's `metadata` filters, each `key:value` (split at the first colon: keys have none), as
 * pairs, at most as many as a session holds; one that is not, or more, is 400 `invalid_field` `metadata`.
 */
export const decodeMetadataFilter = (
  filters: ReadonlyArray<string>
): Effect.Effect<ReadonlyArray<readonly [string, string]>, InvalidField> => {
  // No more pairs than a session can hold: each is a condition of the query.
  if (filters.length > METADATA_LIMITS.pairs) return Effect.fail(new InvalidField({ field: "metadata" }))
  const pairs: Array<readonly [string, string]> = []
  for (const filter of filters) {
    const at = filter.indexOf(":")
    const key = at < 0 ? "" : filter.slice(0, at)
    const value = filter.slice(at + 1)
    if (!Schema.is(MetadataKey)(key) || value.length > METADATA_LIMITS.valueLength)
      return Effect.fail(new InvalidField({ field: "metadata" }))
    pairs.push([key, value])
  }
  return Effect.succeed(pairs)
}

/** The opaque list cursor: base64url of the JSON `[created_at, id]` of the last row shown. */
const CursorCodec = Schema.StringFromBase64Url.pipe(
  Schema.decodeTo(Schema.fromJsonString(Schema.Tuple([Schema.DateFromString, Schema.String])))
)

export const encodeCursor = (row: SessionRow) =>
  Schema.encodeSync(CursorCodec)([row.created_at, row.id] as const)

export const decodeCursor = (cursor: string): Effect.Effect<Cursor, InvalidField> =>
  Schema.decodeUnknownEffect(CursorCodec)(cursor).pipe(
    Effect.map(([createdAt, id]) => ({ createdAt, id })),
    Effect.mapError(() => new InvalidField({ field: "cursor" }))
  )
