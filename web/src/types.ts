// The API's shapes the dashboard reads (the service's OpenAPI has them all).

export type Role = "owner" | "admin" | "member" | "viewer"

export interface User {
  readonly id: string
  readonly email: string
}

export interface Account {
  readonly id: string
  readonly name: string
  readonly kind: "personal" | "organization"
  readonly role: Role
  readonly personal: boolean
}

export interface ApiKey {
  readonly id: string
  readonly name: string
  readonly prefix: string
  readonly created_at: string
  readonly last_used_at: string | null
  readonly revoked_at: string | null
  readonly scopes: ReadonlyArray<string> | null
  readonly mode: "live" | "test"
}

export interface CreatedKey extends ApiKey {
  readonly secret: string
}

export interface Recording {
  readonly status: "recording" | "processing" | "ready" | "failed"
  readonly url: string
  readonly content_type: string
  readonly frames: number
  readonly bytes: number | null
  readonly duration_ms: number | null
}

export interface Session {
  readonly id: string
  readonly status: "creating" | "ready" | "closed" | "error"
  readonly session_type: string
  readonly device: string
  readonly cdp_url: string
  readonly bytes_up: number
  readonly bytes_down: number
  readonly proxy_region: string | null
  readonly created_at: string
  readonly ready_at: string | null
  readonly expires_at: string
  readonly ended_at: string | null
  readonly ended_reason: string | null
  readonly active_connection_leases: number | null
  readonly recording?: Recording | null
}

export interface Page<A> {
  readonly data: ReadonlyArray<A>
  readonly next_cursor: string | null
  readonly has_more: boolean
}

export interface LedgerEntry {
  readonly id: string
  readonly kind: string
  readonly amount_micro_usd: number
  readonly balance_after_micro_usd: number
  readonly description: string
  readonly created_at: string
}

export interface BillingSummary {
  readonly balance_micro_usd: number
  readonly egress_price: { readonly usd_per_gb: number }
  readonly low_balance_threshold_micro_usd: number
  readonly recent_entries: ReadonlyArray<LedgerEntry>
}

export interface Usage {
  readonly from: string
  readonly to: string
  readonly totals: {
    readonly bytes_up: number
    readonly bytes_down: number
    readonly bytes_total: number
    readonly sessions: number
    readonly billed_micro_usd: number
  }
  readonly by_region: ReadonlyArray<{
    readonly region: string
    readonly sessions: number
    readonly bytes_total: number
    readonly billed_micro_usd: number
  }>
  readonly by_key: ReadonlyArray<{
    readonly key_id: string | null
    readonly key_prefix: string | null
    readonly key_name: string | null
    readonly sessions: number
    readonly bytes_total: number
    readonly billed_micro_usd: number
  }>
  readonly by_day: ReadonlyArray<{
    readonly date: string
    readonly bytes_total: number
    readonly sessions: number
  }>
}

export interface Webhook {
  readonly id: string
  readonly url: string
  readonly events: ReadonlyArray<string>
  readonly description?: string | null
  readonly signing_secret_preview: string
  readonly created_at: string
  readonly disabled_at?: string | null
}

export interface Delivery {
  readonly id: string
  readonly webhook_id: string
  readonly event_type: string
  readonly state: string
  readonly attempts: number
  readonly next_attempt_at: string | null
  readonly last_status: number | null
  readonly created_at: string
}

export interface Member {
  readonly user_id: string
  readonly email: string
  readonly role: Role
  readonly owner: boolean
  readonly joined_at: string
}

export interface ServiceAccount {
  readonly id: string
  readonly name: string
  readonly role: Role
  readonly created_at: string
}

export interface AuditEvent {
  readonly id: string
  readonly occurred_at: string
  readonly actor: { readonly type: string; readonly id: string | null }
  readonly action: string
  readonly target: { readonly type: string; readonly id: string | null }
  readonly ip: string | null
  readonly outcome: "success" | "failure"
}
