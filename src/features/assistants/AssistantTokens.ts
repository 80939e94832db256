import { Clock, Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import * as Sql from "../../platform/db/Sql.ts"
import { SqlClient } from "effect/sql"
import type { Principal } from "../../kernel/Owner.ts"
import type { PrincipalResolver } from "../policy/PrincipalResolvers.ts"
import { Secrets } from "../../platform/crypto/Secrets.ts"
import { signer } from "../../platform/crypto/Signed.ts"

/** What an assistant runtime's token says: whose runtime, in which session, until when. */
export interface RuntimeClaims {
  readonly assistantId: string
  readonly accountId: string
  readonly sessionId: string
  readonly expiresAt: Date
}

export const RUNTIME_TOKEN_PREFIX = "asrt_"

const ClaimsCodec = Schema.StringFromBase64Url.pipe(
  Schema.decodeTo(
    Schema.fromJsonString(
      Schema.Struct({
        asst: Schema.String,
        acc: Schema.String,
        sid: Schema.String,
        exp: Schema.Finite
      })
    )
  )
)
const encodeClaims = Schema.encodeSync(ClaimsCodec)
const decodeClaims = Schema.decodeUnknownOption(ClaimsCodec)

/**
 * The short-lived token an assistant's runtime calls the service with
 * (`RBS_ASSISTANT_TOKEN` in its sandbox): signed for one assistant and the
 * session it runs in, expiring with that session. A valid signature is not
 * enough: `Assistants` also checks that the session is still the assistant's
 * (a pause or a restart ends the old token at once).
 */
export class AssistantTokens extends Context.Service<
  AssistantTokens,
  {
    readonly sign: (claims: RuntimeClaims) => string
    readonly verify: (token: string, now: Date) => Option.Option<RuntimeClaims>
  }
>()("rbs/assistants/AssistantTokens") {
  static readonly layer = Layer.effect(
    AssistantTokens,
    Effect.gen(function* () {
      const tokens = signer(Redacted.value((yield* Secrets).assistantTokenKey))
      return AssistantTokens.of({
        sign: (claims) =>
          RUNTIME_TOKEN_PREFIX +
          tokens.sign(
            encodeClaims({
              asst: claims.assistantId,
              acc: claims.accountId,
              sid: claims.sessionId,
              exp: claims.expiresAt.getTime()
            })
          ),
        verify: (token, now) =>
          token.startsWith(RUNTIME_TOKEN_PREFIX)
            ? tokens.open(token.slice(RUNTIME_TOKEN_PREFIX.length)).pipe(
                Option.flatMap(decodeClaims),
                Option.filter((claims) => claims.exp > now.getTime()),
                Option.map((claims) => ({
                  assistantId: claims.asst,
                  accountId: claims.acc,
                  sessionId: claims.sid,
                  expiresAt: new Date(claims.exp)
                }))
              )
            : Option.none()
      })
    })
  )
}

/** An assistant runtime's token names its assistant while the session it was made for is still the assistant's. */
export const runtimePrincipals = Effect.gen(function* () {
  const tokens = yield* AssistantTokens
  const sql = yield* SqlClient.SqlClient
  return {
    accepts: (token: string) => token.startsWith(RUNTIME_TOKEN_PREFIX),
    resolve: (token: string) =>
      Effect.gen(function* () {
        const claims = tokens.verify(token, new Date(yield* Clock.currentTimeMillis))
        if (Option.isNone(claims)) return Option.none<Principal>()
        const { assistantId, accountId, sessionId } = claims.value
        const current = yield* sql<{ readonly id: string }>`
          SELECT id FROM assistants WHERE id = ${assistantId} AND account_id = ${accountId}
            AND session_id = ${sessionId} AND status = 'running'`.pipe(Sql.orDefect)
        return current.length === 0
          ? Option.none<Principal>()
          : Option.some<Principal>({ _tag: "Assistant", assistantId, accountId, sessionId })
      })
  } satisfies PrincipalResolver
})
