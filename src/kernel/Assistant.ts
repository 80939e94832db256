import { Schema } from "effect"
import { wire } from "./ApiError.ts"
import { CommandField } from "./Sandbox.ts"

/** An assistant's name: a lowercase slug, 1 to 63 characters, unique in its account. */
const Name = Schema.String.annotate({
  description: "A lowercase slug (`a-z`, `0-9`, `-`), 1 to 63 characters, unique in the account."
})

/** The most an assistant's config, or its runtime state, may hold (JSON, UTF-8). */
export const MAX_CONFIG_BYTES = 64 * 1024
export const MAX_STATE_BYTES = 256 * 1024

export const AssistantConfig = Schema.Record(Schema.String, Schema.Unknown).annotate({
  description: `The assistant's configuration, a JSON object of at most ${MAX_CONFIG_BYTES / 1024} KiB (its model, prompt, tools: the runtime's to read). \`command\` (a string run through \`sh -c\`, or argv) is the runtime the service starts in its sandbox; without one the sandbox idles. \`env\` (string values) is added to the runtime's environment.`
})

export const ASSISTANT_STATUSES = ["running", "paused"] as const

export const AssistantInfo = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("assistant"),
  name: Schema.String,
  image: Schema.NullOr(Schema.String),
  config: AssistantConfig,
  config_version: Schema.Number.annotate({ description: "Bumped by every change of `config`." }),
  status: Schema.Literals(ASSISTANT_STATUSES).annotate({
    description:
      "`running`: its runtime is kept up (started again when its session ends); `paused`: its runtime is stopped, its workspace kept."
  }),
  workspace_id: Schema.String.annotate({ description: "Its home workspace (`assistant_home: true`)." }),
  session_id: Schema.NullOr(Schema.String).annotate({
    description: "The sandbox session its runtime runs in now; null while paused or starting."
  }),
  restarts: Schema.Number.annotate({
    description: "How many times its runtime has been started after the first."
  }),
  last_error: Schema.NullOr(Schema.String).annotate({
    description: "Why the last start of its runtime failed; null once one succeeds."
  }),
  links: Schema.Array(
    Schema.Struct({
      provider: Schema.String,
      subject: Schema.String,
      email: Schema.NullOr(Schema.String),
      created_at: Schema.DateFromString
    })
  ).annotate({
    description: "The people linked to it through the assistant sign-in (`ASSISTANT_IDP`), oldest first."
  }),
  created_at: Schema.DateFromString,
  updated_at: Schema.DateFromString
})
export type AssistantInfo = typeof AssistantInfo.Type

export const AssistantList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(AssistantInfo)
})

export const CreateAssistantRequest = Schema.Struct({
  name: Name,
  image: Schema.optionalKey(
    Schema.NullOr(Schema.String).annotate({ description: "The sandbox image (default the node's)." })
  ),
  config: Schema.optionalKey(AssistantConfig)
})
export type CreateAssistantRequest = typeof CreateAssistantRequest.Type

export const PatchAssistantRequest = Schema.Struct({
  name: Schema.optionalKey(Name),
  image: Schema.optionalKey(Schema.NullOr(Schema.String)),
  config: Schema.optionalKey(AssistantConfig)
})
export type PatchAssistantRequest = typeof PatchAssistantRequest.Type

/** What `config.command` may be. */
export const RuntimeCommand = CommandField

export const PutCredentialRequest = Schema.Struct({
  name: Schema.String.annotate({
    description: "The credential's name: letters, digits, `_`, `-` and `.`, 1 to 128 characters."
  }),
  value: Schema.String.annotate({ description: "The secret, at most 16 KiB; never returned." }),
  assistant_id: Schema.optionalKey(
    Schema.NullOr(Schema.String).annotate({
      description:
        "One assistant's (it wins over the account's of the same name); omitted: every assistant's."
    })
  )
})
export type PutCredentialRequest = typeof PutCredentialRequest.Type

export const CredentialInfo = Schema.Struct({
  object: Schema.Literal("assistant_credential"),
  name: Schema.String,
  assistant_id: Schema.NullOr(Schema.String),
  created_at: Schema.DateFromString,
  updated_at: Schema.DateFromString
})

export const ResolveCredentialRequest = Schema.Struct({ name: Schema.String })
export type ResolveCredentialRequest = typeof ResolveCredentialRequest.Type
export const ResolvedCredential = Schema.Struct({
  object: Schema.Literal("assistant_credential_value"),
  name: Schema.String,
  value: Schema.String,
  scope: Schema.Literals(["assistant", "account"]).annotate({
    description: "Whose value it is: the assistant's own, or the account's."
  })
})

export const RuntimeState = Schema.Struct({
  state: Schema.Record(Schema.String, Schema.Unknown).annotate({
    description: `The runtime's state, a JSON object of at most ${MAX_STATE_BYTES / 1024} KiB.`
  })
})
export type RuntimeState = typeof RuntimeState.Type
export const RuntimeStateInfo = Schema.Struct({
  object: Schema.Literal("assistant_runtime_state"),
  assistant_id: Schema.String,
  state: Schema.Record(Schema.String, Schema.Unknown),
  version: Schema.Number.annotate({ description: 'The state\'s version; its `ETag` is `"<version>"`.' }),
  updated_at: Schema.DateFromString
})

export class AssistantNotFound extends Schema.TaggedError<AssistantNotFound>()("AssistantNotFound", {}) {
  readonly status = 404
  readonly code = "assistant_not_found"
  override readonly message = "Assistant not found."
  static readonly Wire = wire(this, () => new AssistantNotFound())
}

export class AssistantConflict extends Schema.TaggedError<AssistantConflict>()("AssistantConflict", {
  detail: Schema.String
}) {
  readonly status = 409
  readonly code = "assistant_conflict"
  override get message() {
    return this.detail
  }
  static readonly Wire = wire(this, (message) => new AssistantConflict({ detail: message }))
}

export class CredentialNotFound extends Schema.TaggedError<CredentialNotFound>()("CredentialNotFound", {}) {
  readonly status = 404
  readonly code = "credential_not_found"
  override readonly message = "Credential not found."
  static readonly Wire = wire(this, () => new CredentialNotFound())
}

/** A write made with `If-Match` on a version that is no longer the current one. */
export class PreconditionFailed extends Schema.TaggedError<PreconditionFailed>()("PreconditionFailed", {}) {
  readonly status = 412
  readonly code = "precondition_failed"
  override readonly message = "The resource changed since it was read (If-Match)."
  static readonly Wire = wire(this, () => new PreconditionFailed())
}

export const UsageEventRequest = Schema.Struct({
  model: Schema.String.annotate({ description: "The model used (1 to 200 characters)." }),
  input_tokens: Schema.Int.annotate({ description: "Tokens in, 0 or more." }),
  output_tokens: Schema.Int.annotate({ description: "Tokens out, 0 or more." }),
  cost_usd: Schema.optionalKey(
    Schema.Finite.annotate({
      description: "What the call cost at the model's provider, if known (kept in micro-USD)."
    })
  ),
  occurred_at: Schema.optionalKey(
    Schema.String.annotate({
      description: "When it happened (ISO 8601); default now. At most a day in the past."
    })
  ),
  metadata: Schema.optionalKey(
    Schema.Record(Schema.String, Schema.Unknown).annotate({ description: "Anything else, at most 4 KiB." })
  )
})
export type UsageEventRequest = typeof UsageEventRequest.Type

export const UsageEventInfo = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("assistant_usage_event"),
  assistant_id: Schema.String,
  model: Schema.String,
  input_tokens: Schema.Number,
  output_tokens: Schema.Number,
  cost_micro_usd: Schema.NullOr(Schema.Number),
  metadata: Schema.Record(Schema.String, Schema.Unknown),
  occurred_at: Schema.DateFromString,
  created_at: Schema.DateFromString
})
export type UsageEventInfo = typeof UsageEventInfo.Type

export const UsageEventList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(UsageEventInfo),
  has_more: Schema.Boolean,
  next_cursor: Schema.NullOr(Schema.String)
})

export const AssistantLoginUrl = Schema.Struct({
  object: Schema.Literal("assistant_login_url"),
  assistant_id: Schema.String,
  provider: Schema.String,
  url: Schema.String.annotate({
    description: "Where the person goes to sign in at the provider; it brings them back to the callback."
  }),
  expires_at: Schema.DateFromString
})

export const AssistantLink = Schema.Struct({
  object: Schema.Literal("assistant_link"),
  assistant_id: Schema.String,
  provider: Schema.String,
  subject: Schema.String.annotate({ description: "The person at the provider (`sub`)." }),
  email: Schema.NullOr(Schema.String),
  created_at: Schema.DateFromString
})
export type AssistantLink = typeof AssistantLink.Type
