import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { audits, requires } from "../policy/Access.ts"
import { Authenticate, Authorize } from "../policy/AuthMiddleware.ts"
import {
  AssistantConflict,
  AssistantInfo,
  AssistantList,
  AssistantNotFound,
  CreateAssistantRequest,
  CredentialInfo,
  CredentialNotFound,
  PatchAssistantRequest,
  PreconditionFailed,
  PutCredentialRequest,
  ResolveCredentialRequest,
  ResolvedCredential,
  RuntimeState,
  RuntimeStateInfo,
  UsageEventInfo,
  UsageEventList,
  UsageEventRequest
} from "../../kernel/Assistant.ts"
import {
  ConfigIntentInfo,
  ConfigIntentList,
  DecideIntentRequest,
  IntentConflict,
  IntentNotFound,
  ProposeIntentRequest
} from "../../kernel/AssistantIntent.ts"
import {
  BindChannelRequest,
  ChannelInfo,
  ChannelNotFound,
  ResolveChannelRequest,
  ResolvedChannel
} from "../../kernel/AssistantChannel.ts"
import { Forbidden, InvalidField, RateLimited, ResourceLimitReached } from "../../kernel/Errors.ts"
import { PerAccountRateLimit, RouteRateLimit } from "../limits/LimitsMiddleware.ts"

const id = { id: Schema.String }
const LIMITED =
  "Spends the account's assistant budget (`LIMIT_ASSISTANT_MUTATIONS_PER_MINUTE`, 60) with the `X-RateLimit-*` headers."
const RUNTIME =
  "The runtime calls it with its own token (`Authorization: Bearer $RBS_ASSISTANT_TOKEN`, `asrt_...`), which is valid while the session it was made for is its assistant's: a pause or a restart ends it."

export class AssistantsApi extends HttpApiGroup.make("assistants")
  .add(
    HttpApiEndpoint.post("create", "/v1/assistants", {
      payload: CreateAssistantRequest,
      success: AssistantInfo.pipe(HttpApiSchema.status(201)),
      error: [InvalidField.Wire, AssistantConflict.Wire, RateLimited.Wire, ResourceLimitReached.Wire]
    })
      .annotateMerge(requires("sessions.write", "any", audits("assistant.created", "assistant")))
      .annotate(PerAccountRateLimit, "assistant_write")
      .annotate(
        OpenApi.Description,
        `Creates an assistant: \`name\` (a slug, unique in the account; 409 \`assistant_conflict\` when taken), \`image\` (its sandbox's), \`config\` (a JSON object; \`config.command\` is its runtime, \`config.env\` added to the runtime's environment). Its home workspace (\`assistant_home: true\`) is made with it (409 \`resource_limit\` when the account has \`LIMIT_WORKSPACES_PER_ACCOUNT\` workspaces already), and it starts \`running\`: a node starts a sandbox session on the home and runs the runtime there in the background (cwd \`/root\`, the home) with \`RBS_API_URL\`, \`RBS_ASSISTANT_ID\` and \`RBS_ASSISTANT_TOKEN\`; when that session ends (its TTL, a crash, its node lost) another is started. The sessions are the account's, billed as any. ${LIMITED}`
      ),
    HttpApiEndpoint.get("list", "/v1/assistants", { success: AssistantList })
      .annotateMerge(requires("sessions.read"))
      .annotate(OpenApi.Description, "The account's assistants, newest first."),
    HttpApiEndpoint.get("get", "/v1/assistants/:id", {
      params: id,
      success: AssistantInfo,
      error: AssistantNotFound.Wire
    })
      .annotateMerge(requires("sessions.read", "any-or-assistant"))
      .annotate(
        OpenApi.Description,
        `One assistant: its status, config, its runtime's session, restarts, last start error and the people linked to it (\`links\`). Its runtime reads its own. ${RUNTIME}`
      ),
    HttpApiEndpoint.patch("patch", "/v1/assistants/:id", {
      params: id,
      payload: PatchAssistantRequest,
      success: AssistantInfo,
      error: [AssistantNotFound.Wire, InvalidField.Wire, AssistantConflict.Wire, RateLimited.Wire]
    })
      .annotateMerge(requires("sessions.write", "any", audits("assistant.updated", "assistant", "id")))
      .annotate(PerAccountRateLimit, "assistant_write")
      .annotate(
        OpenApi.Description,
        `Changes \`name\`, \`image\` or \`config\` (replaced whole; \`config_version\` goes up). The running runtime keeps its environment: a new \`config.command\`, \`env\` or \`image\` applies from its next start (pause and resume to restart it now). ${LIMITED}`
      ),
    HttpApiEndpoint.post("pause", "/v1/assistants/:id/pause", {
      params: id,
      success: AssistantInfo,
      error: [AssistantNotFound.Wire, RateLimited.Wire]
    })
      .annotateMerge(requires("sessions.write", "any", audits("assistant.paused", "assistant", "id")))
      .annotate(PerAccountRateLimit, "assistant_write")
      .annotate(
        OpenApi.Description,
        `Stops its runtime: its session ends (billed to here) and its token stops at once; its home workspace and runtime state are kept. Pausing a paused assistant changes nothing. ${LIMITED}`
      ),
    HttpApiEndpoint.post("resume", "/v1/assistants/:id/resume", {
      params: id,
      success: AssistantInfo,
      error: [AssistantNotFound.Wire, RateLimited.Wire]
    })
      .annotateMerge(requires("sessions.write", "any", audits("assistant.resumed", "assistant", "id")))
      .annotate(PerAccountRateLimit, "assistant_write")
      .annotate(
        OpenApi.Description,
        `Marks it \`running\`: a node starts its runtime in a new session on its home, with what the workspace kept. ${LIMITED}`
      ),
    HttpApiEndpoint.put("putCredential", "/v1/assistants/credentials", {
      payload: PutCredentialRequest,
      success: CredentialInfo,
      error: [InvalidField.Wire, AssistantNotFound.Wire, RateLimited.Wire]
    })
      .annotateMerge(
        requires("keys.write", "any", audits("assistant_credential.set", "assistant_credential"))
      )
      .annotate(PerAccountRateLimit, "assistant_write")
      .annotate(
        OpenApi.Description,
        `Puts a credential into the vault: \`name\` (letters, digits, \`_\`, \`-\`, \`.\`), \`value\` (at most 16 KiB), \`assistant_id\` (one assistant's; omitted: every assistant of the account may resolve it, and an assistant's own of the same name wins). Replaces the value of the same name and scope. The value is encrypted at rest (AES-256-GCM) and never returned by any route but \`resolve-credential\` to a runtime. ${LIMITED}`
      ),
    HttpApiEndpoint.post("resolveCredential", "/v1/assistants/resolve-credential", {
      payload: ResolveCredentialRequest,
      success: ResolvedCredential,
      error: [InvalidField.Wire, CredentialNotFound.Wire, Forbidden.Wire]
    })
      .annotateMerge(
        requires(null, "assistant", audits("assistant_credential.resolved", "assistant_credential"))
      )
      .annotate(
        OpenApi.Description,
        `The value of credential \`name\` its assistant may use (its own, else the account's); 404 \`credential_not_found\`. Only an assistant runtime's token opens it (any other credential: 403); each call is audited, with its name and never its value. ${RUNTIME}`
      ),
    HttpApiEndpoint.post("bindChannel", "/v1/assistants/:id/channels", {
      params: id,
      payload: BindChannelRequest,
      success: ChannelInfo.pipe(HttpApiSchema.status(201)),
      error: [AssistantNotFound.Wire, InvalidField.Wire, AssistantConflict.Wire, RateLimited.Wire]
    })
      .annotateMerge(requires("sessions.write", "any", audits("assistant_channel.bound", "assistant", "id")))
      .annotate(PerAccountRateLimit, "assistant_write")
      .annotate(
        OpenApi.Description,
        `Binds a channel to the assistant: \`kind\` (\`webhook\`, \`slack\`, \`telegram\`, \`discord\`, \`email\`, \`custom\`), \`name\` (a slug, unique among its channels; 409 \`assistant_conflict\`), \`config\` (not secret) and \`secret\` (kept encrypted; the answer says only \`has_secret\`). Its runtime reads the binding with \`resolve-channel\` and speaks the channel's protocol. ${LIMITED}`
      ),
    HttpApiEndpoint.delete("unbindChannel", "/v1/assistants/:id/channels/:bid", {
      params: { id: Schema.String, bid: Schema.String },
      success: HttpApiSchema.NoContent,
      error: [AssistantNotFound.Wire, ChannelNotFound.Wire, RateLimited.Wire]
    })
      .annotateMerge(
        requires("sessions.write", "any", audits("assistant_channel.unbound", "assistant", "id"))
      )
      .annotate(PerAccountRateLimit, "assistant_write")
      .annotate(OpenApi.Description, `Removes a channel binding (and its secret). ${LIMITED}`),
    HttpApiEndpoint.post("resolveChannel", "/v1/assistants/resolve-channel", {
      payload: ResolveChannelRequest,
      success: ResolvedChannel,
      error: [InvalidField.Wire, ChannelNotFound.Wire, Forbidden.Wire]
    })
      .annotateMerge(requires(null, "assistant", audits("assistant_channel.resolved", "assistant")))
      .annotate(
        OpenApi.Description,
        `One of its assistant's channels by \`name\` (or id), with its \`secret\`; 404 \`channel_not_found\`. Only an assistant runtime's token opens it (any other credential: 403); each call is audited. ${RUNTIME}`
      ),
    HttpApiEndpoint.post("recordUsage", "/v1/assistants/:id/usage-events", {
      params: id,
      payload: UsageEventRequest,
      success: UsageEventInfo.pipe(HttpApiSchema.status(201)),
      error: [AssistantNotFound.Wire, InvalidField.Wire]
    })
      .annotateMerge(requires("sessions.write", "any-or-assistant"))
      .annotate(
        OpenApi.Description,
        `Records model use: \`model\`, \`input_tokens\`, \`output_tokens\`, \`cost_usd\` (the provider's, if known; kept in micro-USD), \`occurred_at\` (default now; at most a day back), \`metadata\` (4 KiB). Summed per assistant in \`GET /v1/usage\` (\`assistants\`). Reported, not billed. ${RUNTIME}`
      ),
    HttpApiEndpoint.get("listUsage", "/v1/assistants/:id/usage-events", {
      params: id,
      query: Schema.Struct({
        limit: Schema.optionalKey(Schema.NumberFromString),
        cursor: Schema.optionalKey(Schema.String)
      }),
      success: UsageEventList,
      error: [AssistantNotFound.Wire, InvalidField.Wire]
    })
      .annotateMerge(requires("sessions.read", "any-or-assistant"))
      .annotate(
        OpenApi.Description,
        "The assistant's usage events, newest first: pages of `limit` (1 to 200, default 50), the next one from `cursor` (`next_cursor`)."
      ),
    HttpApiEndpoint.get("getState", "/v1/assistants/:id/runtime-state", {
      params: id,
      success: RuntimeStateInfo,
      error: AssistantNotFound.Wire
    })
      .annotateMerge(requires("sessions.read", "any-or-assistant"))
      .annotate(
        OpenApi.Description,
        `The runtime's state (\`{ state }\`, a JSON object kept across restarts) with its \`ETag\` (\`"<version>"\`). Members read it; a runtime reads its own assistant's alone. ${RUNTIME}`
      ),
    HttpApiEndpoint.put("putState", "/v1/assistants/:id/runtime-state", {
      params: id,
      payload: RuntimeState,
      headers: Schema.Struct({ "if-match": Schema.optionalKey(Schema.String) }),
      success: RuntimeStateInfo,
      error: [AssistantNotFound.Wire, InvalidField.Wire, PreconditionFailed.Wire]
    })
      .annotateMerge(requires("sessions.write", "any-or-assistant"))
      .annotate(
        OpenApi.Description,
        `Replaces the runtime's state (at most 256 KiB of JSON). With \`If-Match: "<version>"\` the write lands only on that version: 412 \`precondition_failed\` when another write came first (read it again); without it, the last write wins. Answers the new state and \`ETag\`. ${RUNTIME}`
      )
  )
  .middleware(RouteRateLimit)
  .middleware(Authorize)
  .middleware(Authenticate)
  .annotate(OpenApi.Title, "Assistants") {}

const intent = { id: Schema.String, rid: Schema.String }
const INTENTS =
  "An intent is `pending` until a member with `accounts.admin` (an admin or owner) approves or denies it, or until `expires_at` (it is then `expired`). Each step is audited and sent as a webhook event (`config_intent.proposed`, `.approved`, `.denied`, `.expired`)."

/** `/v2`: config intents (they belong to the next major version). */
export class AssistantIntentsApi extends HttpApiGroup.make("assistantIntents")
  .add(
    HttpApiEndpoint.post("propose", "/v2/assistants/:id/config-intents", {
      params: id,
      payload: ProposeIntentRequest,
      success: ConfigIntentInfo.pipe(HttpApiSchema.status(201)),
      error: [AssistantNotFound.Wire, InvalidField.Wire]
    })
      .annotateMerge(
        requires("sessions.write", "any-or-assistant", audits("config_intent.proposed", "assistant", "id"))
      )
      .annotate(
        OpenApi.Description,
        `Proposes a change to the assistant's \`config\`: \`patch\` (a JSON merge patch, RFC 7396; what it would make must be a valid config), \`reason\`, \`expires_in_seconds\` (60 to 604800, default 86400). Recorded on the config version it was proposed on. ${INTENTS} ${RUNTIME}`
      ),
    HttpApiEndpoint.get("list", "/v2/assistants/:id/config-intents", {
      params: id,
      query: Schema.Struct({
        limit: Schema.optionalKey(Schema.NumberFromString),
        cursor: Schema.optionalKey(Schema.String),
        status: Schema.optionalKey(Schema.String)
      }),
      success: ConfigIntentList,
      error: [AssistantNotFound.Wire, InvalidField.Wire]
    })
      .annotateMerge(requires("sessions.read", "any-or-assistant"))
      .annotate(
        OpenApi.Description,
        "The assistant's intents, newest first (`status` filters; `limit` 1 to 100, default 20; `cursor`)."
      ),
    HttpApiEndpoint.get("get", "/v2/assistants/:id/config-intents/:rid", {
      params: intent,
      success: ConfigIntentInfo,
      error: [AssistantNotFound.Wire, IntentNotFound.Wire]
    })
      .annotateMerge(requires("sessions.read", "any-or-assistant"))
      .annotate(OpenApi.Description, `One intent. ${INTENTS}`),
    HttpApiEndpoint.post("approve", "/v2/assistants/:id/config-intents/:rid/approve", {
      params: intent,
      payload: [DecideIntentRequest, Schema.Null],
      success: ConfigIntentInfo,
      error: [AssistantNotFound.Wire, IntentNotFound.Wire, IntentConflict.Wire, InvalidField.Wire]
    })
      .annotateMerge(requires("accounts.admin", "any", audits("config_intent.approved", "assistant", "id")))
      .annotate(
        OpenApi.Description,
        "Approves a pending intent and applies its patch to the assistant's `config` in the same transaction (`config_version` goes up; `applied_version` says to what), only on the version it was proposed on: 409 `intent_conflict` when the config changed since, or the intent is no longer pending. The running runtime sees the new config at its next start. `note` is kept with the decision."
      ),
    HttpApiEndpoint.post("deny", "/v2/assistants/:id/config-intents/:rid/deny", {
      params: intent,
      payload: [DecideIntentRequest, Schema.Null],
      success: ConfigIntentInfo,
      error: [AssistantNotFound.Wire, IntentNotFound.Wire, IntentConflict.Wire, InvalidField.Wire]
    })
      .annotateMerge(requires("accounts.admin", "any", audits("config_intent.denied", "assistant", "id")))
      .annotate(
        OpenApi.Description,
        "Denies a pending intent (its patch is not applied); 409 `intent_conflict` when it is no longer pending. `note` is kept with the decision."
      )
  )
  .middleware(Authorize)
  .middleware(Authenticate)
  .annotate(OpenApi.Title, "Assistant config intents") {}
