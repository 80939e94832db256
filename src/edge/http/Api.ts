import { Schema } from "effect"
import { HttpApi, HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { AccountsApi } from "../../features/identity/AccountsApi.ts"
import { AuditApi } from "../../features/audit/AuditApi.ts"
import { AuthApi, SessionAuthApi } from "../../features/identity/AuthApi.ts"
import { KeysApi } from "../../features/identity/KeysApi.ts"
import { ProviderLoginApi } from "../../features/identity/ProviderLoginApi.ts"
import { SshKeysApi } from "../../features/identity/SshKeysApi.ts"
import { ExtensionsApi } from "../../features/extensions/ExtensionsApi.ts"
import { ImagesApi } from "../../features/images/ImagesApi.ts"
import { WebhooksApi } from "../../features/webhooks/WebhooksApi.ts"
import { BillingApi, CheckoutPagesApi } from "../../features/billing/BillingApi.ts"
import { NodeDraining, ServiceUnavailable } from "../../kernel/Errors.ts"
import { UsageApi } from "../../features/usage/UsageApi.ts"
import { addRawRoutes } from "../guard/RawRoutes.ts"
import { RequestValidation } from "./RequestValidation.ts"
import { RateLimitHeaders } from "../../features/limits/LimitsMiddleware.ts"
import { SessionsApi } from "../../features/sessions/SessionsApi.ts"
import { SandboxApi } from "../../features/sessions/SandboxApi.ts"
import { RecordingsApi } from "../../features/recordings/RecordingsApi.ts"
import { SessionLogsApi } from "../../features/logs/SessionLogsApi.ts"
import { JobsApi } from "../../features/jobs/JobsApi.ts"
import { WorkspacesApi } from "../../features/workspaces/WorkspacesApi.ts"
import { AssistantIntentsApi, AssistantsApi } from "../../features/assistants/AssistantsApi.ts"

/** A runtime pool as `/readyz` reports it. */
const PoolState = Schema.Struct({ idle: Schema.Number, target: Schema.Number, capacity: Schema.Number })

/** Whether this node runs a kind of session, and why not, as `/readyz` reports it. */
const KindState = Schema.Union([
  Schema.Struct({ available: Schema.Literal(true) }),
  Schema.Struct({
    available: Schema.Literal(false),
    reason: Schema.String.annotate({ description: "Why this node runs none, and what would change that." })
  })
])

export class SystemApi extends HttpApiGroup.make("system")
  .add(
    HttpApiEndpoint.get("healthz", "/healthz", {
      success: Schema.Struct({ status: Schema.Literal("ok") })
    }).annotate(OpenApi.Description, "The process is up."),
    HttpApiEndpoint.get("readyz", "/readyz", {
      success: Schema.Struct({
        status: Schema.Literal("ready"),
        database: Schema.Literal("ok"),
        browser_pool: PoolState,
        context_pool: PoolState,
        sandbox_pool: PoolState,
        kinds: Schema.Record(Schema.String, KindState),
        node: Schema.Struct({ id: Schema.String, shards: Schema.Number })
      }),
      error: [ServiceUnavailable.Wire, NodeDraining.Wire]
    }).annotate(
      OpenApi.Description,
      'The database answers and each pool with places on this node has launched its first runtime (a browser; a sandbox). Each pool\'s `idle` (warm now), `target` (warm wanted now) and `capacity` (`MAX_BROWSERS`, `MAX_CONTEXTS`, `MAX_SANDBOXES`; 0: this node runs no such sessions); the context pool\'s warm ones are browser contexts made ahead in the accounts\' shared browsers. `kinds`: each kind of session (`browser`, `context`, `sandbox`) this node runs, `{ "available": true }`, or does not, `{ "available": false, "reason": "..." }` with why and what would change that (`MAX_SANDBOXES` is 0, the service does not run as root, no runc, no Chromium, ...), found once at start; a node that runs no sessions of a kind is still ready, and a create of that kind on a service where no node runs it answers 503 `session_type_unavailable` with the same reason. `node.shards`: how many of the shards of its own shard group (16, the sessions it holds) this node\'s runner serves now: all of them once sessions placed here can start. A node stopped with SIGTERM answers 503 `draining` while it serves its live sessions (`DRAIN_SECONDS`): a load balancer sends it no new client.'
    )
  )
  .annotate(OpenApi.Title, "System") {}

/** The whole HTTP contract: one definition gives the server, the typed client and OpenAPI. */
export class Api extends HttpApi.make("remote-browser-service")
  .add(SystemApi)
  .add(AuthApi)
  .add(SessionAuthApi)
  .add(ProviderLoginApi)
  .add(KeysApi)
  .add(AccountsApi)
  .add(SessionsApi)
  .add(RecordingsApi)
  .add(SessionLogsApi)
  .add(SandboxApi)
  .add(UsageApi)
  .add(BillingApi)
  .add(CheckoutPagesApi)
  .add(SshKeysApi)
  .add(ExtensionsApi)
  .add(ImagesApi)
  .add(WebhooksApi)
  .add(JobsApi)
  .add(WorkspacesApi)
  .add(AssistantsApi)
  .add(AssistantIntentsApi)
  .add(AuditApi)
  .middleware(RequestValidation)
  .middleware(RateLimitHeaders)
  // A body field no route knows is refused by name (400 `invalid_field`), as the OpenAPI's
  // `additionalProperties: false` says: a misspelt field, or one this service does not have, is
  // never dropped in silence.
  .annotate(HttpApi.PayloadParseOptions, { onExcessProperty: "error" })
  .annotateMerge(
    OpenApi.annotations({
      title: "Remote Browser Service",
      version: "1.0.0",
      description:
        "Self-hosted remote browsers (driven over the Chrome DevTools Protocol), context sessions and runc sandboxes, with live view and recordings, workspaces and snapshots, durable jobs and an MCP endpoint; every byte of egress metered against a prepaid balance. Public routes take `Authorization: Bearer <API key or access token>` or the dashboard `service_session` cookie, and act on the active account (`X-Service-Account`: an account id, its exact name, or `personal`; default personal; an API key is bound to its own account). Each route requires a scope or permission (see each operation's `x-required-access`), held by the caller's role and, for a scoped key, granted to the key. Every error has the body `{ error: { code, message } }`.",
      transform: addRawRoutes
    })
  ) {}
