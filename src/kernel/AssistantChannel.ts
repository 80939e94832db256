import { Schema } from "effect"
import { wire } from "./ApiError.ts"

export const CHANNEL_KINDS = ["webhook", "slack", "telegram", "discord", "email", "custom"] as const

export const BindChannelRequest = Schema.Struct({
  kind: Schema.Literals(CHANNEL_KINDS).annotate({
    description:
      "What the channel is: an inbound webhook endpoint, a chat integration (`slack`, `telegram`, `discord`), `email`, or `custom`. The runtime speaks its protocol; the service keeps the binding."
  }),
  name: Schema.String.annotate({ description: "A slug, unique among the assistant's channels." }),
  config: Schema.optionalKey(
    Schema.Record(Schema.String, Schema.Unknown).annotate({
      description:
        "What the runtime needs that is not secret (a channel id, a chat, an address), at most 16 KiB."
    })
  ),
  secret: Schema.optionalKey(
    Schema.String.annotate({
      description:
        "Its secret (a bot token, a signing secret), at most 16 KiB: kept encrypted, resolved only by the runtime."
    })
  )
})
export type BindChannelRequest = typeof BindChannelRequest.Type

export const ChannelInfo = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("assistant_channel"),
  assistant_id: Schema.String,
  kind: Schema.Literals(CHANNEL_KINDS),
  name: Schema.String,
  config: Schema.Record(Schema.String, Schema.Unknown),
  has_secret: Schema.Boolean,
  created_at: Schema.DateFromString
})
export type ChannelInfo = typeof ChannelInfo.Type

export const ResolveChannelRequest = Schema.Struct({
  name: Schema.String.annotate({ description: "The channel's name (or its id)." })
})
export type ResolveChannelRequest = typeof ResolveChannelRequest.Type
export const ResolvedChannel = Schema.Struct({
  ...ChannelInfo.fields,
  object: Schema.Literal("assistant_channel_resolved"),
  secret: Schema.NullOr(Schema.String)
})

export class ChannelNotFound extends Schema.TaggedError<ChannelNotFound>()("ChannelNotFound", {}) {
  readonly status = 404
  readonly code = "channel_not_found"
  override readonly message = "Channel not found."
  static readonly Wire = wire(this, () => new ChannelNotFound())
}
