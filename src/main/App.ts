import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as ClientAddress from "../edge/guard/ClientAddress.ts"
import { CLIENT_MAX_MESSAGE } from "../platform/net/WebSocketEnds.ts"
import { Effect, Layer, Metric } from "effect"
import { ClusterLive } from "../platform/cluster/ClusterLive.ts"
import { DrainWaits, NodeDrain } from "../platform/cluster/NodeDrain.ts"
import { HttpRouter } from "effect/http"
import { HttpApiBuilder, HttpApiSwagger } from "effect/http-api"
import * as McpHttp from "../edge/mcp/McpHttp.ts"
import {
  AssistantTokens,
  runtimePrincipals as AssistantRuntimePrincipals
} from "../features/assistants/AssistantTokens.ts"
import { PrincipalResolvers } from "../features/policy/PrincipalResolvers.ts"
import { Assistants } from "../features/assistants/Assistants.ts"
import { AssistantUsage } from "../features/assistants/AssistantUsage.ts"
import { AssistantVault } from "../features/assistants/AssistantVault.ts"
import * as AssistantSupervisor from "../features/assistants/AssistantSupervisor.ts"
import * as AssistantWake from "../features/assistants/AssistantWake.ts"
import { AssistantIntentsHttp, AssistantsHttp } from "../edge/http/AssistantsHttp.ts"
import { AssistantIntents } from "../features/assistants/AssistantIntents.ts"
import { AssistantLinks } from "../features/assistants/AssistantLinks.ts"
import { createServer } from "node:http"
import { Api } from "../edge/http/Api.ts"
import { AccountsHttp } from "../edge/http/AccountsHttp.ts"
import { AccountsRepo } from "../features/identity/AccountsRepo.ts"
import { Audit } from "../features/audit/Audit.ts"
import { AuditHttp } from "../edge/http/AuditHttp.ts"
import { AccountHooks } from "../features/identity/AccountHooks.ts"
import { ApiKeysRepo } from "../features/identity/ApiKeysRepo.ts"
import * as AuthHttp from "../edge/http/AuthHttp.ts"
import * as AuthMiddlewareLive from "../edge/guard/AuthMiddlewareLive.ts"
import { Authenticator } from "../edge/guard/Authenticator.ts"
import { Policy } from "../edge/guard/Policy.ts"
import { ProviderLogins } from "../features/identity/ProviderLogins.ts"
import { UsersRepo } from "../features/identity/UsersRepo.ts"
import { SshKeys } from "../features/identity/SshKeys.ts"
import { SshKeysHttp } from "../edge/http/SshKeysHttp.ts"
import { ExtensionsHttp } from "../edge/http/ExtensionsHttp.ts"
import { ImagesHttp } from "../edge/http/ImagesHttp.ts"
import { Billing } from "../features/billing/Billing.ts"
import * as BillingHttp from "../edge/http/BillingHttp.ts"
import { Checkouts } from "../features/billing/Checkouts.ts"
import { PaymentProvider } from "../features/billing/PaymentProvider.ts"
import { Secrets } from "../platform/crypto/Secrets.ts"
import { IdentityLive } from "./IdentityLive.ts"
import * as BrowserDownloads from "../runtimes/browser/BrowserDownloads.ts"
import * as Tracing from "../platform/observability/Tracing.ts"
import { BrowserPool } from "../runtimes/browser/BrowserPool.ts"
import { RuntimePools } from "../runtime/RuntimePools.ts"
import * as BrowserRuntime from "../runtimes/browser/BrowserRuntime.ts"
import * as ContextRuntime from "../runtimes/context/ContextRuntime.ts"
import * as SandboxRuntime from "../runtimes/sandbox/SandboxRuntime.ts"
import { type SessionKind, SessionKinds } from "../runtime/SessionKinds.ts"
import * as BrowserKind from "../runtimes/browser/BrowserKind.ts"
import * as ContextKind from "../runtimes/context/ContextKind.ts"
import * as SandboxKind from "../runtimes/sandbox/SandboxKind.ts"
import { Images } from "../runtimes/sandbox/Images.ts"
import { SandboxHost } from "../runtimes/sandbox/SandboxHost.ts"
import { EgressProxies } from "../runtimes/shared/EgressProxy.ts"
import { AdHosts } from "../platform/net/AdHosts.ts"
import * as CdpRelay from "../edge/live/CdpRelay.ts"
import * as CdpDiscovery from "../edge/live/CdpDiscovery.ts"
import * as LiveViewHttp from "../edge/live/LiveViewHttp.ts"
import * as DashboardHttp from "../edge/http/DashboardHttp.ts"
import { NodeHop } from "../edge/live/NodeHop.ts"
import { Nodes } from "../platform/cluster/Nodes.ts"
import * as NodeLiveness from "../platform/cluster/NodeLiveness.ts"
import * as NodeListeners from "../platform/cluster/NodeListeners.ts"
import { Placement } from "../platform/cluster/Placement.ts"
import { type ConfigServices, ServiceConfig, type ServiceConfigInput } from "../platform/config/Config.ts"
import { RecordingsConfig } from "../features/recordings/RecordingsConfig.ts"
import { AuditConfig } from "../features/audit/AuditConfig.ts"
import { BillingConfig } from "../features/billing/BillingConfig.ts"
import { BrowserConfig } from "../runtimes/browser/BrowserConfig.ts"
import { SessionsConfig } from "../features/sessions/SessionsConfig.ts"
import { JobsConfig } from "../features/jobs/JobsConfig.ts"
import { AssistantsConfig } from "../features/assistants/AssistantsConfig.ts"
import * as Database from "../platform/db/Database.ts"
import { Egress } from "../platform/net/Egress.ts"
import { LocalPorts } from "../platform/net/LocalPorts.ts"
import * as BodyLimit from "../edge/guard/BodyLimit.ts"
import * as CrossSiteGuard from "../edge/http/CrossSiteGuard.ts"
import * as ErrorResponses from "../edge/guard/ErrorResponses.ts"
import { RequestValidationLive } from "../edge/http/RequestValidationLive.ts"
import { Idempotency, layerPurge as IdempotencyPurge } from "../features/idempotency/Idempotency.ts"
import { Usage } from "../features/usage/Usage.ts"
import { UsageHttp } from "../edge/http/UsageHttp.ts"
import { SystemHttp } from "../edge/http/SystemHttp.ts"
import * as MetricsHttp from "../edge/http/MetricsHttp.ts"
import { LiveSessions } from "../runtime/LiveSessions.ts"
import { PreviewTokens } from "../features/sessions/PreviewTokens.ts"
import * as ServiceLock from "../platform/db/ServiceLock.ts"
import * as Reconciler from "../features/sessions/Reconciler.ts"
import * as LostNodes from "../features/sessions/LostNodes.ts"
import { AccountBounds } from "../features/limits/AccountBounds.ts"
import { ConcurrencySlots } from "../features/limits/ConcurrencySlots.ts"
import * as LimitsHttp from "../edge/http/LimitsHttp.ts"
import { RateLimits } from "../features/limits/RateLimits.ts"
import { LimitsConfig } from "../features/limits/LimitsConfig.ts"
import { SandboxConfig } from "../runtimes/sandbox/SandboxConfig.ts"
import { ContextConfig } from "../runtimes/context/ContextConfig.ts"
import { SessionAdmission } from "../features/sessions/SessionAdmission.ts"
import { SessionHooks, SessionLifecycle } from "../features/sessions/SessionLifecycle.ts"
import { SessionActors } from "../features/sessions/SessionActors.ts"
import { layerEntity } from "../features/sessions/SessionEntity.ts"
import { Sessions } from "../features/sessions/Sessions.ts"
import { SessionDoor } from "../edge/live/SessionDoor.ts"
import { SandboxCalls } from "../features/sessions/SandboxCalls.ts"
import * as SandboxHttp from "../edge/http/SandboxHttp.ts"
import * as Pty from "../edge/live/Pty.ts"
import * as Gateway from "../edge/live/Gateway.ts"
import { ConnectTokens } from "../edge/live/ConnectTokens.ts"
import { GatewayTokens } from "../edge/live/GatewayTokens.ts"
import { BlobStore } from "../platform/blobs/BlobStore.ts"
import { drainWait as RecordingsDrainWait, Recordings } from "../features/recordings/Recordings.ts"
import { RecordingsRepo } from "../features/recordings/RecordingsRepo.ts"
import * as RecordingsHttp from "../edge/http/RecordingsHttp.ts"
import { SessionLogsHttp } from "../edge/http/SessionLogsHttp.ts"
import { SessionsHttp } from "../edge/http/SessionsHttp.ts"
import {
  drainWait as SessionsDrainWait,
  openSessions as OpenSessionsLive,
  placedSessions as PlacedSessionsLive,
  recordedSessions as RecordedSessionsLive,
  SessionsRepo
} from "../features/sessions/SessionsRepo.ts"
import * as SessionEvents from "../features/sessions/SessionEvents.ts"
import { WebhookOutbox } from "../features/webhooks/Outbox.ts"
import * as WebhookDeliverer from "../features/webhooks/Deliverer.ts"
import {
  layerRetention as WebhooksRetention,
  WebhookDeliveries
} from "../features/webhooks/WebhookDeliveries.ts"
import { Webhooks } from "../features/webhooks/Webhooks.ts"
import { WebhooksHttp } from "../edge/http/WebhooksHttp.ts"
import * as JobEngine from "../features/jobs/JobEngine.ts"
import { JobRetention } from "../features/jobs/JobRetention.ts"
import { JobKinds } from "../features/jobs/JobKinds.ts"
import * as BrowserJobs from "../features/jobs/BrowserJobs.ts"
import * as ExecJob from "../features/jobs/ExecJob.ts"
import * as WorkspaceJobs from "../features/workspaces/WorkspaceJobs.ts"
import { Jobs } from "../features/jobs/Jobs.ts"
import * as JobsHttp from "../edge/http/JobsHttp.ts"
import { ActiveJobs } from "../features/jobs/ActiveJobs.ts"
import { WorkspaceDisks } from "../features/workspaces/WorkspaceDisks.ts"
import { Workspaces } from "../features/workspaces/Workspaces.ts"
import { WorkspaceImport } from "../features/workspaces/WorkspaceImport.ts"
import { WorkspaceSnapshots } from "../features/workspaces/WorkspaceSnapshots.ts"
import { WorkspaceStore } from "../features/workspaces/WorkspaceStore.ts"
import * as WorkspaceSessions from "../features/workspaces/WorkspaceSessions.ts"
import * as ExtensionSessions from "../features/extensions/ExtensionSessions.ts"
import { Extensions } from "../features/extensions/Extensions.ts"
import * as ImageSessions from "../features/images/ImageSessions.ts"
import { AccountImages } from "../features/images/AccountImages.ts"
import { ImagesConfig } from "../features/images/ImagesConfig.ts"
import { SessionLogs } from "../features/logs/SessionLogs.ts"
import { SessionLogsConfig } from "../features/logs/SessionLogsConfig.ts"
import { SessionLogsRepo } from "../features/logs/SessionLogsRepo.ts"
import { WorkspacesHttp } from "../edge/http/WorkspacesHttp.ts"

// The one composition root: named layers, no business logic.

/** Repositories and stateless services over the database. */
const DataLive = Layer.mergeAll(
  SessionsRepo.layer,
  RecordingsRepo.layer,
  SessionLogsRepo.layer,
  BlobStore.layer,
  PreviewTokens.layer,
  GatewayTokens.layer,
  ConnectTokens.layer,
  AssistantTokens.layer,
  Billing.layer,
  Idempotency.layer,
  Audit.layer,
  UsersRepo.layer,
  ApiKeysRepo.layer,
  AccountsRepo.layer,
  Nodes.layer,
  ActiveJobs.layer
).pipe(Layer.provideMerge(Layer.mergeAll(Secrets.layer, WebhookOutbox.layer)))

/** What features add to transitions: billing's signup credit and egress charge, webhook events, the assistants' wake. */
const HooksLive = Layer.mergeAll(
  Billing.layerSignupCredit.pipe(Layer.provide(AccountHooks.layerNone)),
  AssistantWake.layerSessionHooks.pipe(
    Layer.provide(SessionEvents.layerHooks),
    Layer.provide(Billing.layerSessionHooks),
    Layer.provide(SessionHooks.layerNone)
  )
)

/** `/v1/webhooks` and its hourly retention. */
const WebhooksLive = WebhooksRetention.pipe(
  Layer.provideMerge(Layer.mergeAll(Webhooks.layer, WebhookDeliveries.layer))
)

/** What a composition may add to the service: kinds of session beside the browser, context and sandbox ones. */
export interface CoreOptions {
  readonly kinds: ReadonlyArray<SessionKind>
}

// The service's modules, from the bottom up: each names what it provides; what it needs is in its
// type, provided by the modules below it (`layerCoreWith` lists them in that order).

/** Each module's own settings, resolved from the configuration as given, and the data dir's lock. */
const SettingsModule = Layer.mergeAll(
  ServiceLock.layer,
  LimitsConfig.layer,
  SandboxConfig.layer,
  ContextConfig.layer,
  BrowserConfig.layer,
  SessionsConfig.layer,
  JobsConfig.layer,
  AssistantsConfig.layer,
  RecordingsConfig.layer,
  SessionLogsConfig.layer,
  AuditConfig.layer,
  BillingConfig.layer,
  ImagesConfig.layer
)

/** The database (migrated), the repositories and token signers over it, and this node's workspace disks. */
const StorageModule = WorkspaceDisks.sessionHomes.pipe(
  Layer.provideMerge(WorkspaceDisks.layer),
  Layer.provideMerge(DataLive),
  Layer.provideMerge(Database.layer)
)

/**
 * A session's one door for its transitions with what features add to them, the restart's
 * reconciliation of the previous process's sessions, and the node's drain.
 */
const LifecycleModule = Reconciler.layerStartup.pipe(
  Layer.provideMerge(SessionLifecycle.layer),
  Layer.provideMerge(HooksLive),
  Layer.provideMerge(
    NodeDrain.layer.pipe(
      Layer.provide(
        DrainWaits.layer([SessionsDrainWait, RecordingsDrainWait]).pipe(Layer.provide(RecordedSessionsLive))
      )
    )
  )
)

/** The egress regions and SSRF guard, the ports no session may reach, and the ad and tracker hosts. */
const NetworkModule = Layer.mergeAll(Egress.layer, AdHosts.layer).pipe(Layer.provideMerge(LocalPorts.layer))

/** Rate limits, concurrency slots and the balance gate: what admission asks. */
const LimitsModule = Layer.mergeAll(
  RateLimits.layer,
  AccountBounds.layer,
  ConcurrencySlots.layer.pipe(Layer.provide(OpenSessionsLive)),
  Billing.layerBalanceGate
)

/**
 * The runtimes: the pools (the browser, context and sandbox kinds, and those a host adds) with
 * the kinds' descriptors, the cluster with placement, and the session actors that run them.
 */
const RuntimesModule = (options: CoreOptions) =>
  Layer.mergeAll(SessionActors.layer, Placement.layer.pipe(Layer.provide(PlacedSessionsLive))).pipe(
    Layer.provideMerge(ClusterLive),
    Layer.provideMerge(
      Layer.mergeAll(
        RuntimePools.nodeCapacity.pipe(
          Layer.provideMerge(
            RuntimePools.layer([
              BrowserRuntime.pool,
              ContextRuntime.pool,
              SandboxRuntime.pool,
              ...options.kinds.map((kind) => kind.pool)
            ])
          )
        ),
        SessionKinds.layer([
          BrowserKind.descriptor,
          ContextKind.descriptor,
          SandboxKind.descriptor,
          ...options.kinds.map((kind) => kind.descriptor)
        ])
      )
    ),
    Layer.provideMerge(Layer.mergeAll(SandboxHost.layer, Images.layer, EgressProxies.layerNoDeps)),
    Layer.provideMerge(
      Layer.mergeAll(
        BrowserPool.layer,
        LiveSessions.layer,
        SessionAdmission.layerNoDeps,
        Recordings.layerNoDeps.pipe(Layer.provide(RecordedSessionsLive)),
        SessionLogs.layer
      )
    )
  )

/** Payments, a session's workspace, and the assistants' usage, intents and links. */
const AccountWorkModule = Layer.mergeAll(
  PaymentProvider.layer,
  WorkspaceSessions.layer.pipe(Layer.provideMerge(WorkspaceStore.layer)),
  ExtensionSessions.layer.pipe(Layer.provideMerge(Extensions.layer)),
  ImageSessions.layer.pipe(Layer.provideMerge(AccountImages.layer)),
  AssistantUsage.layer,
  AssistantIntents.layer,
  AssistantLinks.layer
)

/** The use cases and the work they keep doing: sessions, usage, audit, webhooks, retention. */
const ServicesModule = Layer.mergeAll(
  // The actor answers sandbox calls through the same connections as everyone's: one Sessions.
  layerEntity.pipe(Layer.provideMerge(Sessions.layerNoDeps)),
  Reconciler.layerExpiryReaper,
  IdempotencyPurge,
  Checkouts.layer,
  Usage.layer,
  SshKeys.layer,
  Audit.layerRetention,
  Authenticator.layer.pipe(Layer.provide(PrincipalResolvers.layer([AssistantRuntimePrincipals]))),
  ProviderLogins.layer,
  NodeHop.layer,
  NodeLiveness.layer,
  NodeListeners.layer,
  LostNodes.layer,
  WebhookDeliverer.layer,
  WebhooksLive,
  Recordings.layerRetention,
  SessionLogs.layerRetention,
  JobRetention.layerRetention.pipe(Layer.provideMerge(JobRetention.layer)),
  BrowserDownloads.layerRetention,
  DashboardHttp.DashboardAssets.layer
)

/** Jobs and workspaces: the engine, each kind of job from its own module, snapshots and imports. */
const WorkModule = WorkspaceImport.layer.pipe(
  Layer.provideMerge(Layer.mergeAll(Workspaces.layer, WorkspaceSnapshots.layer)),
  Layer.provideMerge(Layer.mergeAll(JobEngine.layer, Jobs.layer)),
  Layer.provideMerge(JobKinds.layer([BrowserJobs.kinds, ExecJob.kinds, WorkspaceJobs.workspaceJobKinds])),
  Layer.provideMerge(WorkspaceStore.workspaceNodes)
)

/** What the transports share: the session door, the policy, a sandbox's calls, and the assistants. */
const DoorsModule = SandboxCalls.layer.pipe(
  Layer.provideMerge(
    Layer.mergeAll(
      SessionDoor.layer,
      Policy.layer,
      Assistants.layer,
      AssistantVault.layer,
      AssistantSupervisor.layer
    )
  )
)

/**
 * The service without HTTP: its modules, each over those below it. Stale sessions of a previous
 * process are closed before the actors take any message.
 */
export const layerCoreWith = (options: CoreOptions) =>
  DoorsModule.pipe(
    Layer.provideMerge(WorkModule),
    Layer.provideMerge(ServicesModule),
    Layer.provideMerge(AccountWorkModule),
    Layer.provideMerge(RuntimesModule(options)),
    Layer.provideMerge(IdentityLive),
    Layer.provideMerge(LimitsModule),
    Layer.provideMerge(NetworkModule),
    Layer.provideMerge(LifecycleModule),
    Layer.provideMerge(StorageModule),
    Layer.provideMerge(SettingsModule)
  )

/** The service as it ships: the browser, context and sandbox kinds. */
export const layerCore = layerCoreWith({ kinds: [] })

/** `/v1/*`, `/auth/*`, OpenAPI and Swagger UI, `/metrics`, `/healthz`, `/readyz`, the CDP relay, the live view. */
export const layerRoutes = Layer.mergeAll(
  HttpApiBuilder.layer(Api, { openapiPath: "/api-docs/openapi.json" }).pipe(
    Layer.provide([
      SystemHttp,
      AuthHttp.layer,
      AccountsHttp,
      SessionsHttp,
      RecordingsHttp.RecordingsHttp,
      SessionLogsHttp,
      SandboxHttp.SandboxHttp,
      UsageHttp,
      BillingHttp.layer,
      SshKeysHttp,
      ExtensionsHttp,
      ImagesHttp,
      AuditHttp,
      WebhooksHttp,
      JobsHttp.JobsHttp,
      WorkspacesHttp,
      AssistantsHttp,
      AssistantIntentsHttp
    ]),
    Layer.provide([RequestValidationLive, AuthMiddlewareLive.layer, LimitsHttp.layer])
  ),
  HttpApiSwagger.layer(Api, { path: "/swagger-ui" }),
  McpHttp.layer,
  MetricsHttp.layer,
  CdpRelay.layer,
  CdpDiscovery.layer,
  LiveViewHttp.layer,
  RecordingsHttp.layerInternal,
  SandboxHttp.layerInternal,
  JobsHttp.layerInternal,
  Pty.layer,
  Gateway.layer,
  // Global middleware, outermost first: no body past the limit, then the per-session origins (which
  // none of the service's own guards concern), then the CSRF guard.
  BodyLimit.layer,
  Gateway.layerOrigins,
  CrossSiteGuard.layer,
  ClientAddress.layer,
  DashboardHttp.layer,
  ErrorResponses.layerErrorBodies
)

/** An HTTP server on `HOST:PORT` serving `layerRoutes` over `layerCore`. */
export const layerServer = Layer.unwrap(
  ServiceConfig.useSync((config) =>
    HttpRouter.serve(layerRoutes).pipe(
      Layer.provide(
        NodeHttpServer.layer(createServer, {
          host: config.host,
          port: config.port,
          gracefulShutdownTimeout: "1 second",
          // No route upgrades through the server's own WebSocket (the relays take the socket): its limit is a client's.
          websocket: { maxPayload: CLIENT_MAX_MESSAGE, perMessageDeflate: false }
        })
      )
    )
  )
)

/**
 * The served service's own metric registry: what its `/metrics` shows is its
 * own alone, though another service runs in the same process. (The library
 * layer records into the host's registry, for the host to serve.)
 */
const layerOwnMetrics = Layer.effect(
  Metric.MetricRegistry,
  Effect.sync(() => new Map())
)

const layerWith = <E>(config: Layer.Layer<ConfigServices, E>, options: CoreOptions = { kinds: [] }) =>
  layerServer.pipe(
    Layer.provideMerge(layerCoreWith(options)),
    Layer.provide([ServiceConfig.layerLogLevel, Tracing.layer, layerOwnMetrics]),
    Layer.provideMerge(config)
  )

/** The whole service for a given configuration (and the kinds of session a host adds). */
export const layer = (config: ServiceConfigInput = {}, options?: CoreOptions) =>
  layerWith(ServiceConfig.layer(config), options)

/** The whole service configured from the environment (`npm start`). */
export const layerFromEnv = layerWith(ServiceConfig.layerFromEnv)

/** The service without HTTP, for a host that brings its own server or none. */
export const layerLibrary = (config: ServiceConfigInput = {}, options: CoreOptions = { kinds: [] }) =>
  layerCoreWith(options).pipe(
    Layer.provide([ServiceConfig.layerLogLevel, Tracing.layer]),
    Layer.provideMerge(ServiceConfig.layer(config))
  )
