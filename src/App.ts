import { NodeHttpServer } from "@effect/platform-node"
import { Layer } from "effect"
import { ClusterLive } from "./cluster/ClusterLive.ts"
import { NodeDrain } from "./cluster/NodeDrain.ts"
import { HttpRouter } from "effect/http"
import { HttpApiBuilder, HttpApiSwagger } from "effect/http-api"
import * as McpHttp from "./mcp/McpHttp.ts"
import { AssistantTokens } from "./assistants/AssistantTokens.ts"
import { Assistants } from "./assistants/Assistants.ts"
import { AssistantUsage } from "./assistants/AssistantUsage.ts"
import { AssistantVault } from "./assistants/AssistantVault.ts"
import * as AssistantSupervisor from "./assistants/AssistantSupervisor.ts"
import * as AssistantWake from "./assistants/AssistantWake.ts"
import { AssistantIntentsHttp, AssistantsHttp } from "./assistants/AssistantsHttp.ts"
import { AssistantIntents } from "./assistants/AssistantIntents.ts"
import { AssistantLinks } from "./assistants/AssistantLinks.ts"
import { createServer } from "node:http"
import { Api } from "./Api.ts"
import { AccountsHttp } from "./accounts/AccountsHttp.ts"
import { AccountsRepo } from "./accounts/AccountsRepo.ts"
import { Audit } from "./audit/Audit.ts"
import { AuditHttp } from "./audit/AuditHttp.ts"
import { AccountHooks } from "./auth/AccountHooks.ts"
import { ApiKeysRepo } from "./auth/ApiKeysRepo.ts"
import * as AuthHttp from "./auth/AuthHttp.ts"
import * as AuthMiddlewareLive from "./auth/AuthMiddlewareLive.ts"
import { ProviderLogins } from "./auth/ProviderLogins.ts"
import { UsersRepo } from "./auth/UsersRepo.ts"
import { SshKeys } from "./ssh/SshKeys.ts"
import { SshKeysHttp } from "./ssh/SshKeysHttp.ts"
import { Billing } from "./billing/Billing.ts"
import * as BillingHttp from "./billing/BillingHttp.ts"
import { Checkouts } from "./billing/Checkouts.ts"
import { PaymentProvider } from "./billing/PaymentProvider.ts"
import { Secrets } from "./auth/Secrets.ts"
import { IdentityLive } from "./auth/IdentityLive.ts"
import * as BrowserDownloads from "./browser/BrowserDownloads.ts"
import * as Tracing from "./observability/Tracing.ts"
import { BrowserPool } from "./browser/BrowserPool.ts"
import { RuntimePools } from "./runtime/RuntimePools.ts"
import { Images } from "./sandbox/Images.ts"
import { SandboxHost } from "./sandbox/SandboxHost.ts"
import { EgressProxies } from "./egress/EgressProxy.ts"
import * as CdpRelay from "./cdp/CdpRelay.ts"
import * as LiveViewHttp from "./liveview/LiveViewHttp.ts"
import * as DashboardHttp from "./web/DashboardHttp.ts"
import { NodeHop } from "./cluster/NodeHop.ts"
import * as NodeLiveness from "./cluster/NodeLiveness.ts"
import { Placement } from "./cluster/Placement.ts"
import { ServiceConfig, type ServiceConfigInput } from "./Config.ts"
import * as Database from "./db/Database.ts"
import { Egress } from "./egress/Egress.ts"
import { LocalPorts } from "./egress/LocalPorts.ts"
import * as CrossSiteGuard from "./http/CrossSiteGuard.ts"
import * as ErrorResponses from "./http/ErrorResponses.ts"
import { RequestValidationLive } from "./http/RequestValidationLive.ts"
import { Idempotency, layerPurge as IdempotencyPurge } from "./idempotency/Idempotency.ts"
import { Usage } from "./usage/Usage.ts"
import { UsageHttp } from "./usage/UsageHttp.ts"
import { SystemHttp } from "./http/SystemHttp.ts"
import * as MetricsHttp from "./metrics/MetricsHttp.ts"
import { LiveSessions } from "./sessions/LiveSessions.ts"
import { PreviewTokens } from "./sessions/PreviewTokens.ts"
import * as ServiceLock from "./ServiceLock.ts"
import * as Reconciler from "./sessions/Reconciler.ts"
import { ConcurrencySlots } from "./limits/ConcurrencySlots.ts"
import * as LimitsHttp from "./limits/LimitsHttp.ts"
import { RateLimits } from "./limits/RateLimits.ts"
import { SessionAdmission } from "./sessions/SessionAdmission.ts"
import { SessionHooks, SessionLifecycle } from "./sessions/SessionLifecycle.ts"
import { SessionActors } from "./sessions/SessionActors.ts"
import { layerEntity } from "./sessions/SessionEntity.ts"
import { Sessions } from "./sessions/Sessions.ts"
import { SessionDoor } from "./sessions/SessionDoor.ts"
import { RunOnce } from "./sandbox/RunOnce.ts"
import * as SandboxHttp from "./sandbox/SandboxHttp.ts"
import * as Pty from "./sandbox/Pty.ts"
import * as Gateway from "./sandbox/Gateway.ts"
import { GatewayTokens } from "./sandbox/GatewayTokens.ts"
import { BlobStore } from "./blobs/BlobStore.ts"
import { Recordings } from "./recordings/Recordings.ts"
import { RecordingsRepo } from "./recordings/RecordingsRepo.ts"
import * as RecordingsHttp from "./recordings/RecordingsHttp.ts"
import { SessionsHttp } from "./sessions/SessionsHttp.ts"
import { SessionsRepo } from "./sessions/SessionsRepo.ts"
import * as WebhookEvents from "./webhooks/Outbox.ts"
import { WebhookOutbox } from "./webhooks/Outbox.ts"
import * as WebhookDeliverer from "./webhooks/Deliverer.ts"
import { layerRetention as WebhooksRetention, WebhookDeliveries } from "./webhooks/WebhookDeliveries.ts"
import { Webhooks } from "./webhooks/Webhooks.ts"
import { WebhooksHttp } from "./webhooks/WebhooksHttp.ts"
import * as JobEngine from "./jobs/JobEngine.ts"
import { JobKinds } from "./jobs/JobKinds.ts"
import { Jobs } from "./jobs/Jobs.ts"
import * as JobsHttp from "./jobs/JobsHttp.ts"
import { WorkspaceDisks } from "./workspaces/WorkspaceDisks.ts"
import { Workspaces } from "./workspaces/Workspaces.ts"
import { WorkspaceSessions } from "./workspaces/WorkspaceSessions.ts"
import { WorkspacesHttp } from "./workspaces/WorkspacesHttp.ts"

// The one composition root: named layers, no business logic.

/** Repositories and stateless services over the database. */
const DataLive = Layer.mergeAll(
  SessionsRepo.layer,
  RecordingsRepo.layer,
  BlobStore.layer,
  PreviewTokens.layer,
  GatewayTokens.layer,
  AssistantTokens.layer,
  Billing.layer,
  Idempotency.layer,
  Audit.layer,
  UsersRepo.layer,
  ApiKeysRepo.layer,
  AccountsRepo.layer
).pipe(Layer.provideMerge(Layer.mergeAll(Secrets.layer, WebhookOutbox.layer)))

/** What features add to transitions: billing's signup credit and egress charge, webhook events, the assistants' wake. */
const HooksLive = Layer.mergeAll(
  Billing.layerSignupCredit.pipe(Layer.provide(AccountHooks.layerNone)),
  AssistantWake.layerSessionHooks.pipe(
    Layer.provide(WebhookEvents.layerSessionHooks),
    Layer.provide(Billing.layerSessionHooks),
    Layer.provide(SessionHooks.layerNone)
  )
)

/** `/v1/webhooks` and its hourly retention. */
const WebhooksLive = WebhooksRetention.pipe(
  Layer.provideMerge(Layer.mergeAll(Webhooks.layer, WebhookDeliveries.layer))
)

/**
 * The service without HTTP: database (migrated), identity, the browser pool,
 * session actors and the `Sessions` use cases. Stale sessions of a previous
 * process are closed before the actors take any message.
 */
export const layerCore = RunOnce.layer.pipe(
  Layer.provideMerge(
    Layer.mergeAll(SessionDoor.layer, Assistants.layer, AssistantVault.layer, AssistantSupervisor.layer)
  ),
  Layer.provideMerge(
    Workspaces.layer.pipe(
      Layer.provideMerge(Layer.mergeAll(JobEngine.layer, Jobs.layer)),
      Layer.provideMerge(JobKinds.layer)
    )
  ),
  Layer.provideMerge(
    Layer.mergeAll(
      Sessions.layerNoDeps,
      Reconciler.layerExpiryReaper,
      IdempotencyPurge,
      layerEntity,
      Checkouts.layer,
      Usage.layer,
      SshKeys.layer,
      Audit.layerRetention,
      AuthMiddlewareLive.Authenticator.layer,
      ProviderLogins.layer,
      NodeHop.layer,
      NodeLiveness.layer,
      WebhookDeliverer.layer,
      WebhooksLive,
      Recordings.layerRetention,
      BrowserDownloads.layerRetention,
      DashboardHttp.DashboardAssets.layer
    )
  ),
  Layer.provideMerge(
    Layer.mergeAll(
      PaymentProvider.layer,
      WorkspaceSessions.layer,
      AssistantUsage.layer,
      AssistantIntents.layer,
      AssistantLinks.layer
    )
  ),
  Layer.provideMerge(Layer.mergeAll(SessionActors.layer, Placement.layer)),
  Layer.provideMerge(ClusterLive),
  Layer.provideMerge(RuntimePools.layerNoDeps),
  Layer.provideMerge(Layer.mergeAll(SandboxHost.layer, Images.layer, EgressProxies.layerNoDeps)),
  Layer.provideMerge(
    Layer.mergeAll(
      BrowserPool.layer,
      LiveSessions.layer,
      SessionAdmission.layerNoDeps,
      Recordings.layerNoDeps
    )
  ),
  Layer.provideMerge(IdentityLive),
  Layer.provideMerge(Layer.mergeAll(RateLimits.layer, ConcurrencySlots.layer, Billing.layerBalanceGate)),
  Layer.provideMerge(Egress.layer),
  Layer.provideMerge(LocalPorts.layer),
  Layer.provideMerge(Reconciler.layerStartup),
  Layer.provideMerge(SessionLifecycle.layer),
  Layer.provideMerge(HooksLive),
  Layer.provideMerge(NodeDrain.layer),
  Layer.provideMerge(WorkspaceDisks.layer.pipe(Layer.provideMerge(DataLive))),
  Layer.provideMerge(Database.layer),
  Layer.provideMerge(ServiceLock.layer)
)

/** `/v1/*`, `/auth/*`, OpenAPI and Swagger UI, `/metrics`, `/healthz`, `/readyz`, the CDP relay, the live view. */
export const layerRoutes = Layer.mergeAll(
  HttpApiBuilder.layer(Api, { openapiPath: "/api-docs/openapi.json" }).pipe(
    Layer.provide([
      SystemHttp,
      AuthHttp.layer,
      AccountsHttp,
      SessionsHttp,
      RecordingsHttp.RecordingsHttp,
      SandboxHttp.SandboxHttp,
      UsageHttp,
      BillingHttp.layer,
      SshKeysHttp,
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
  LiveViewHttp.layer,
  RecordingsHttp.layerInternal,
  SandboxHttp.layerInternal,
  JobsHttp.layerInternal,
  Pty.layer,
  Gateway.layer,
  CrossSiteGuard.layer,
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
          websocket: { maxPayload: 512 * 1024 * 1024, perMessageDeflate: false }
        })
      )
    )
  )
)

const layerWith = <E>(config: Layer.Layer<ServiceConfig, E>) =>
  layerServer.pipe(
    Layer.provideMerge(layerCore),
    Layer.provide([ServiceConfig.layerLogLevel, Tracing.layer]),
    Layer.provideMerge(config)
  )

/** The whole service for a given configuration. */
export const layer = (config: ServiceConfigInput = {}) => layerWith(ServiceConfig.layer(config))

/** The whole service configured from the environment (`npm start`). */
export const layerFromEnv = layerWith(ServiceConfig.layerFromEnv)

/** The service without HTTP, for a host that brings its own server or none. */
export const layerLibrary = (config: ServiceConfigInput = {}) =>
  layerCore.pipe(
    Layer.provide([ServiceConfig.layerLogLevel, Tracing.layer]),
    Layer.provideMerge(ServiceConfig.layer(config))
  )
