/**
 * The library for custom hosts: compose these layers into your own Effect
 * program. `layer(config)` is the whole service with its HTTP server;
 * `layerLibrary(config)` is the service without HTTP, driven through
 * `Sessions`. Nothing here reads `process.env` or exits the process.
 */
export { layer, layerCore, layerFromEnv, layerLibrary, layerRoutes, layerServer } from "./App.ts"
export {
  DEFAULT_LIMITS,
  type LimitsConfig,
  makeServiceConfig,
  ServiceConfig,
  type ServiceConfigInput,
  type ServiceConfigShape
} from "./Config.ts"

// Use cases
export { Sessions, type SessionConnection } from "./sessions/Sessions.ts"
export type { CreateError, CreateOptions } from "./sessions/CreateSession.ts"
export { type AdmissionRefused, BalanceGate, SessionAdmission } from "./sessions/SessionAdmission.ts"
export { SessionHooks, SessionLifecycle, type SessionHook } from "./sessions/SessionLifecycle.ts"
export { Users } from "./auth/Users.ts"
export { ApiKeys } from "./auth/ApiKeys.ts"
export { KeyCache } from "./auth/KeyCache.ts"
export { Accounts } from "./accounts/Accounts.ts"
export { ServiceAccounts } from "./accounts/ServiceAccounts.ts"
export { AccessTokens } from "./auth/AccessTokens.ts"
export { OidcLogin } from "./auth/OidcLogin.ts"
export { Audit, type AuditEntry } from "./audit/Audit.ts"
export { SshKeys } from "./ssh/SshKeys.ts"
export { AccountHooks, type AccountHook } from "./auth/AccountHooks.ts"
export { Billing, type Credit } from "./billing/Billing.ts"
export { Checkouts } from "./billing/Checkouts.ts"
export { PaymentProvider } from "./billing/PaymentProvider.ts"
export * as Money from "./billing/Money.ts"
export { Usage } from "./usage/Usage.ts"
export { Idempotency } from "./idempotency/Idempotency.ts"
export { RateLimits, type RateLimitName } from "./limits/RateLimits.ts"
export { ConcurrencySlots } from "./limits/ConcurrencySlots.ts"
export { BrowserPool, type AcquiredBrowser, type BrowserRequest } from "./browser/BrowserPool.ts"
export * as BrowserDownloads from "./browser/BrowserDownloads.ts"

// Live resources behind sessions: one runtime per kind, one door to reach any session's from any node
export {
  type BrowserRuntime,
  type LaunchSpec,
  RuntimeLaunchError,
  type RuntimePool,
  type SandboxRuntime,
  type SessionRuntime
} from "./runtime/SessionRuntime.ts"
export { RuntimePools } from "./runtime/RuntimePools.ts"
export { SessionDoor, type Here, type Kept } from "./sessions/SessionDoor.ts"
export type { ConnectionKind } from "./sessions/SessionConnections.ts"

// Sandboxes: runc containers with a supervisor (docs/sandbox-protocol.md)
export { SandboxHost } from "./sandbox/SandboxHost.ts"
export { type ImageInfo, ImageError, Images, importImage, UnknownImage } from "./sandbox/Images.ts"
export { type Command, type StartRequest, signalName, signalNumber } from "./sandbox/Commands.ts"
export { SupervisorError, type SupervisorLink } from "./sandbox/Supervisor.ts"
export { RunOnce } from "./sandbox/RunOnce.ts"
export { GatewayTokens } from "./sandbox/GatewayTokens.ts"
export { Placement, type NodeRoom, type Place } from "./cluster/Placement.ts"
export { NodeDrain } from "./cluster/NodeDrain.ts"
export type { SessionAddress } from "./cluster/SessionAddress.ts"
/** `serve(layer)`: a host's own service with the drain on SIGTERM; `runMain` the runner that routes the signals. */
export * as ServiceMain from "./ServiceMain.ts"
export { Webhooks } from "./webhooks/Webhooks.ts"
export { WebhookDeliveries } from "./webhooks/WebhookDeliveries.ts"
export { WebhookOutbox } from "./webhooks/Outbox.ts"
export { WebhooksApi } from "./webhooks/WebhooksApi.ts"
export { WebhooksHttp } from "./webhooks/WebhooksHttp.ts"
export { Recordings } from "./recordings/Recordings.ts"
export { BlobStore, type BlobStoreShape, type ByteRange } from "./blobs/BlobStore.ts"
export * as Screencast from "./liveview/Screencast.ts"
export * as Tracing from "./observability/Tracing.ts"
export { PreviewTokens, type PreviewClaims } from "./sessions/PreviewTokens.ts"
export { Egress } from "./egress/Egress.ts"
export { EgressProxies, type EgressTap } from "./egress/EgressProxy.ts"
export { type EgressRegion, parseRegions } from "./egress/Regions.ts"

// The HTTP contract and its handler layers, to mount /v1/* in a host's own router
export { Api, SystemApi } from "./Api.ts"
export { SessionsApi } from "./sessions/SessionsApi.ts"
export { AuthApi, SessionAuthApi } from "./auth/AuthApi.ts"
export { KeysApi } from "./auth/KeysApi.ts"
export { AccountsApi } from "./accounts/AccountsApi.ts"
export { AuditApi } from "./audit/AuditApi.ts"
export { SshKeysApi } from "./ssh/SshKeysApi.ts"
export { BillingApi, CheckoutPagesApi } from "./billing/BillingApi.ts"
export { UsageApi } from "./usage/UsageApi.ts"
export { SessionsHttp } from "./sessions/SessionsHttp.ts"
export { AccountsHttp } from "./accounts/AccountsHttp.ts"
export { AuditHttp } from "./audit/AuditHttp.ts"
export { SshKeysHttp } from "./ssh/SshKeysHttp.ts"
export * as AuthHttp from "./auth/AuthHttp.ts"
export * as BillingHttp from "./billing/BillingHttp.ts"
export { UsageHttp } from "./usage/UsageHttp.ts"
export * as LimitsHttp from "./limits/LimitsHttp.ts"
export { PerSessionRateLimit, RateLimitHeaders, RouteRateLimit } from "./limits/LimitsMiddleware.ts"
export { SystemHttp } from "./http/SystemHttp.ts"
export * as ErrorResponses from "./http/ErrorResponses.ts"
export { RequestValidation } from "./http/RequestValidation.ts"
export { RequestValidationLive } from "./http/RequestValidationLive.ts"
export * as CrossSiteGuard from "./http/CrossSiteGuard.ts"
export {
  Authenticate,
  Authorize,
  CurrentOrigin,
  CurrentOwner,
  CurrentPrincipal,
  SESSION_COOKIE
} from "./auth/AuthMiddleware.ts"
export * as AuthMiddlewareLive from "./auth/AuthMiddlewareLive.ts"
export { type Access, requires, RequiredAccess, routeTable } from "./auth/Access.ts"
export * as CdpRelay from "./cdp/CdpRelay.ts"
export * as LiveViewHttp from "./liveview/LiveViewHttp.ts"
export { RecordingsApi } from "./recordings/RecordingsApi.ts"
export * as RecordingsHttp from "./recordings/RecordingsHttp.ts"
export * as DashboardHttp from "./web/DashboardHttp.ts"
export { SandboxApi } from "./sandbox/SandboxApi.ts"
export * as SandboxHttp from "./sandbox/SandboxHttp.ts"
export * as Pty from "./sandbox/Pty.ts"
export * as Gateway from "./sandbox/Gateway.ts"

// Database
export * as Database from "./db/Database.ts"
export * as Migrations from "./db/Migrations.ts"
export * as EmbeddedPostgres from "./db/EmbeddedPostgres.ts"

// Wire shapes and errors
export * from "./domain/Errors.ts"
export * from "./domain/Session.ts"
export * from "./domain/Identity.ts"
export * from "./domain/IdentityErrors.ts"
export * from "./domain/Owner.ts"
export * from "./domain/Audit.ts"
export * from "./domain/Billing.ts"
export * from "./domain/Usage.ts"
export * from "./domain/Webhook.ts"
export * from "./domain/Recording.ts"
export * from "./domain/Sandbox.ts"
export * from "./domain/SandboxErrors.ts"
export * from "./domain/Job.ts"
export * from "./domain/Workspace.ts"

// Jobs and workspaces
export { Jobs } from "./jobs/Jobs.ts"
export { JobKinds } from "./jobs/JobKinds.ts"
export { JobFailed, type JobKind, jobKind, type JobOutput, type JobRun } from "./jobs/JobKind.ts"
export * as JobEngine from "./jobs/JobEngine.ts"
export { JobsApi } from "./jobs/JobsApi.ts"
export { Workspaces } from "./workspaces/Workspaces.ts"
export { WorkspaceDisks } from "./workspaces/WorkspaceDisks.ts"
export { WorkspacesApi } from "./workspaces/WorkspacesApi.ts"

// The MCP endpoint: its layer (mounted by `layerRoutes`), its tools, and the page actions the browser tools run
export * as McpHttp from "./mcp/McpHttp.ts"
export { TOOLS as McpTools, type ToolDef as McpToolDef } from "./mcp/McpTools.ts"
export * as PageActions from "./browser/PageActions.ts"
