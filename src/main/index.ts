/**
 * The library for custom hosts: compose these layers into your own Effect
 * program. `layer(config)` is the whole service with its HTTP server;
 * `layerLibrary(config)` is the service without HTTP, driven through
 * `Sessions`. Nothing here reads `process.env` or exits the process.
 */
export { layer, layerCore, layerFromEnv, layerLibrary, layerRoutes, layerServer } from "./App.ts"
export { DEFAULT_LIMITS, LimitsConfig } from "../features/limits/LimitsConfig.ts"
export { SandboxConfig } from "../runtimes/sandbox/SandboxConfig.ts"
export { ContextConfig } from "../runtimes/context/ContextConfig.ts"
export {
  ConfigInputs,
  makeServiceConfig,
  ServiceConfig,
  type ServiceConfigInput,
  type ServiceConfigShape
} from "../platform/config/Config.ts"

// Use cases
export { Sessions, type SessionConnection } from "../features/sessions/Sessions.ts"
export type { CreateError, CreateOptions } from "../features/sessions/CreateSession.ts"
export {
  type AdmissionRefused,
  BalanceGate,
  SessionAdmission
} from "../features/sessions/SessionAdmission.ts"
export {
  type LifecyclePart,
  SessionHooks,
  SessionLifecycle,
  type SessionHook,
  type SessionPart
} from "../features/sessions/SessionLifecycle.ts"
export { Users } from "../features/identity/Users.ts"
export { ApiKeys } from "../features/identity/ApiKeys.ts"
export { KeyCache } from "../features/identity/KeyCache.ts"
export { Accounts } from "../features/identity/Accounts.ts"
export { ServiceAccounts } from "../features/identity/ServiceAccounts.ts"
export { AccessTokens } from "../features/identity/AccessTokens.ts"
export { OidcLogin } from "../features/identity/OidcLogin.ts"
export { Audit, type AuditEntry } from "../features/audit/Audit.ts"
export { SshKeys } from "../features/identity/SshKeys.ts"
export { AccountHooks, type AccountHook } from "../features/identity/AccountHooks.ts"
export { Billing, type Credit } from "../features/billing/Billing.ts"
export { Checkouts } from "../features/billing/Checkouts.ts"
export { PaymentProvider } from "../features/billing/PaymentProvider.ts"
export * as Money from "../features/billing/Money.ts"
export { Usage } from "../features/usage/Usage.ts"
export { Idempotency } from "../features/idempotency/Idempotency.ts"
export { RateLimits, type RateLimitName } from "../features/limits/RateLimits.ts"
export { ConcurrencySlots } from "../features/limits/ConcurrencySlots.ts"
export { AccountBounds, type BoundedResource } from "../features/limits/AccountBounds.ts"
export { BrowserPool, type AcquiredBrowser, type BrowserRequest } from "../runtimes/browser/BrowserPool.ts"
export * as BrowserDownloads from "../runtimes/browser/BrowserDownloads.ts"

// Live resources behind sessions: one runtime per kind, one door to reach any session's from any node
export {
  type BrowserRuntime,
  type LaunchSpec,
  RuntimeLaunchError,
  type RuntimePool,
  type SandboxRuntime,
  type SessionRuntime
} from "../runtime/SessionRuntime.ts"
export { RuntimePools } from "../runtime/RuntimePools.ts"
export { SessionDoor, type Here, type Kept } from "../edge/live/SessionDoor.ts"
export type { ConnectionKind } from "../features/sessions/SessionConnections.ts"

// Sandboxes: runc containers with a supervisor (docs/internals/sandbox-protocol.md)
export { SandboxHost } from "../runtimes/sandbox/SandboxHost.ts"
export { type ImageInfo, ImageError, Images, importImage, UnknownImage } from "../runtimes/sandbox/Images.ts"
export { type Command, type StartRequest, signalName, signalNumber } from "../runtime/Exec.ts"
export { SupervisorError } from "../runtime/SupervisorError.ts"
export type { SupervisorLink } from "../runtimes/sandbox/Supervisor.ts"
export { SandboxCalls } from "../features/sessions/SandboxCalls.ts"
export { GatewayTokens } from "../edge/live/GatewayTokens.ts"
export { ConnectTokens } from "../edge/live/ConnectTokens.ts"
export { Placement, type NodeRoom, type Place } from "../platform/cluster/Placement.ts"
export { NodeDrain } from "../platform/cluster/NodeDrain.ts"
export type { SessionAddress } from "../platform/cluster/SessionAddress.ts"
/** `serve(layer)`: a host's own service with the drain on SIGTERM; `runMain` the runner that routes the signals. */
export * as ServiceMain from "./ServiceMain.ts"
export { Webhooks } from "../features/webhooks/Webhooks.ts"
export { WebhookDeliveries } from "../features/webhooks/WebhookDeliveries.ts"
export { WebhookOutbox } from "../features/webhooks/Outbox.ts"
export { WebhooksApi } from "../features/webhooks/WebhooksApi.ts"
export { WebhooksHttp } from "../edge/http/WebhooksHttp.ts"
export { Recordings } from "../features/recordings/Recordings.ts"
export { BlobStore, type BlobStoreShape, type ByteRange } from "../platform/blobs/BlobStore.ts"
export * as Screencast from "../runtimes/shared/Screencast.ts"
export * as Tracing from "../platform/observability/Tracing.ts"
export { PreviewTokens, type PreviewClaims } from "../features/sessions/PreviewTokens.ts"
export { Egress } from "../platform/net/Egress.ts"
export { EgressProxies } from "../runtimes/shared/EgressProxy.ts"
export type { EgressTap } from "../runtime/EgressTap.ts"
export { type EgressRegion, parseRegions } from "../platform/net/Regions.ts"

// The HTTP contract and its handler layers, to mount /v1/* in a host's own router
export { Api, SystemApi } from "../edge/http/Api.ts"
export { SessionsApi } from "../features/sessions/SessionsApi.ts"
export { AuthApi, SessionAuthApi } from "../features/identity/AuthApi.ts"
export { KeysApi } from "../features/identity/KeysApi.ts"
export { AccountsApi } from "../features/identity/AccountsApi.ts"
export { AuditApi } from "../features/audit/AuditApi.ts"
export { SshKeysApi } from "../features/identity/SshKeysApi.ts"
export { ExtensionsApi } from "../features/extensions/ExtensionsApi.ts"
export { ImagesApi } from "../features/images/ImagesApi.ts"
export { AccountImages } from "../features/images/AccountImages.ts"
export { BillingApi, CheckoutPagesApi } from "../features/billing/BillingApi.ts"
export { UsageApi } from "../features/usage/UsageApi.ts"
export { SessionsHttp } from "../edge/http/SessionsHttp.ts"
export { AccountsHttp } from "../edge/http/AccountsHttp.ts"
export { AuditHttp } from "../edge/http/AuditHttp.ts"
export { SshKeysHttp } from "../edge/http/SshKeysHttp.ts"
export { ExtensionsHttp } from "../edge/http/ExtensionsHttp.ts"
export { ImagesHttp } from "../edge/http/ImagesHttp.ts"
export * as AuthHttp from "../edge/http/AuthHttp.ts"
export * as BillingHttp from "../edge/http/BillingHttp.ts"
export { UsageHttp } from "../edge/http/UsageHttp.ts"
export * as LimitsHttp from "../edge/http/LimitsHttp.ts"
export { PerSessionRateLimit, RateLimitHeaders, RouteRateLimit } from "../features/limits/LimitsMiddleware.ts"
export { SystemHttp } from "../edge/http/SystemHttp.ts"
export * as ErrorResponses from "../edge/guard/ErrorResponses.ts"
export { RequestValidation } from "../edge/http/RequestValidation.ts"
export { RequestValidationLive } from "../edge/http/RequestValidationLive.ts"
export * as CrossSiteGuard from "../edge/http/CrossSiteGuard.ts"
export {
  Authenticate,
  Authorize,
  CurrentOrigin,
  CurrentOwner,
  CurrentPrincipal,
  SESSION_COOKIE
} from "../features/policy/AuthMiddleware.ts"
export * as AuthMiddlewareLive from "../edge/guard/AuthMiddlewareLive.ts"
export { type Access, requires, RequiredAccess } from "../features/policy/Access.ts"
export { routeTable } from "../edge/guard/RawRoutes.ts"
export * as CdpRelay from "../edge/live/CdpRelay.ts"
export * as CdpDiscovery from "../edge/live/CdpDiscovery.ts"
export * as LiveViewHttp from "../edge/live/LiveViewHttp.ts"
export { RecordingsApi } from "../features/recordings/RecordingsApi.ts"
export * as RecordingsHttp from "../edge/http/RecordingsHttp.ts"
export * as DashboardHttp from "../edge/http/DashboardHttp.ts"
export { SandboxApi } from "../features/sessions/SandboxApi.ts"
export * as SandboxHttp from "../edge/http/SandboxHttp.ts"
export * as Pty from "../edge/live/Pty.ts"
export * as Gateway from "../edge/live/Gateway.ts"

// Database
export * as Database from "../platform/db/Database.ts"
export * as Migrations from "../platform/db/Migrations.ts"
export * as EmbeddedPostgres from "../platform/db/EmbeddedPostgres.ts"

// Wire shapes and errors; `decodeInput(Schema)` turns a host's untrusted input into a use case's typed one, with the API's 400s
export { decodeInput } from "../kernel/Validation.ts"
export * from "../kernel/Errors.ts"
export * from "../kernel/Session.ts"
export * from "../kernel/Identity.ts"
export * from "../kernel/IdentityErrors.ts"
export * from "../kernel/Owner.ts"
export * from "../kernel/Audit.ts"
export * from "../kernel/Billing.ts"
export * from "../kernel/Usage.ts"
export * from "../kernel/Webhook.ts"
export * from "../kernel/Recording.ts"
export * from "../kernel/Sandbox.ts"
export * from "../kernel/SandboxErrors.ts"
export * from "../kernel/Job.ts"
export * from "../kernel/Workspace.ts"

// Jobs and workspaces
export { Jobs } from "../features/jobs/Jobs.ts"
export { JobKinds } from "../features/jobs/JobKinds.ts"
export { JobFailed, type JobKind, jobKind, type JobOutput, type JobRun } from "../features/jobs/JobKind.ts"
export * as JobEngine from "../features/jobs/JobEngine.ts"
export { JobRetention } from "../features/jobs/JobRetention.ts"
export { JobsApi } from "../features/jobs/JobsApi.ts"
export { Workspaces } from "../features/workspaces/Workspaces.ts"
export { WorkspaceImport } from "../features/workspaces/WorkspaceImport.ts"
export { WorkspaceSnapshots } from "../features/workspaces/WorkspaceSnapshots.ts"
export { WorkspaceDisks } from "../features/workspaces/WorkspaceDisks.ts"
export { WorkspacesApi } from "../features/workspaces/WorkspacesApi.ts"

// The MCP endpoint: its layer (mounted by `layerRoutes`), its tools, and the page actions the browser tools run
export * as McpHttp from "../edge/mcp/McpHttp.ts"
export { TOOLS as McpTools, type ToolDef as McpToolDef } from "../edge/mcp/McpTools.ts"
export * as PageActions from "../runtimes/browser/PageActions.ts"
