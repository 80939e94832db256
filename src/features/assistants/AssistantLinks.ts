import { AssistantsConfig } from "./AssistantsConfig.ts"
import * as Sql from "../../platform/db/Sql.ts"
import { Clock, Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { Audit } from "../audit/Audit.ts"
import { OidcLogin } from "../identity/OidcLogin.ts"
import { redeem } from "../identity/ProviderLogins.ts"
import type { AssistantLink, AssistantNotFound } from "../../kernel/Assistant.ts"
import { LoginFailed, LoginProviderNotFound } from "../../kernel/IdentityErrors.ts"
import { type Owner, systemOwner } from "../../kernel/Owner.ts"
import { findAssistantRow } from "./AssistantRows.ts"

/** How long a sign-in link works. */
export const LINK_FLOW_TTL_MS = 10 * 60 * 1000

/**
 * Assistant sign-in: a person links an assistant to their identity at the
 * provider named by `ASSISTANT_IDP` (an OIDC provider configured as any
 * other, kept for this). `loginUrl` begins the authorization code flow (PKCE,
 * state and nonce kept server-side, one use, ten minutes) for one assistant;
 * the provider's callback (GET, or POST for `form_post`) completes it and
 * records the link. The link carries no session for the browser: whoever holds
 * the URL signs in as themselves, and the assistant learns who they are.
 */
export class AssistantLinks extends Context.Service<
  AssistantLinks,
  {
    readonly isAssistantIdp: (provider: string) => boolean
    readonly loginUrl: (
      owner: Owner,
      provider: string,
      assistantId: string
    ) => Effect.Effect<
      { readonly url: string; readonly expiresAt: Date },
      LoginProviderNotFound | LoginFailed | AssistantNotFound
    >
    readonly complete: (
      provider: string,
      callbackUrl: URL
    ) => Effect.Effect<AssistantLink, LoginProviderNotFound | LoginFailed>
  }
>()("rbs/assistants/AssistantLinks") {
  static readonly layer = Layer.effect(
    AssistantLinks,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const oidc = yield* OidcLogin
      const audit = yield* Audit
      const { assistantIdp } = yield* AssistantsConfig
      if (assistantIdp !== null && !oidc.providers.includes(assistantIdp)) {
        return yield* Effect.die(
          new Error(
            `ASSISTANT_IDP=${assistantIdp} is not a configured OIDC provider (OIDC_<NAME>_ISSUER, ...)`
          )
        )
      }
      const findRow = findAssistantRow(sql)
      const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))
      const isAssistantIdp = (provider: string) => assistantIdp !== null && provider === assistantIdp
      const failed = (provider: string) => (error: { readonly message: string }) =>
        Effect.logWarning("assistant.sign_in_failed", { provider, error: error.message }).pipe(
          Effect.andThen(Effect.fail(new LoginFailed()))
        )

      const loginUrl = Effect.fn("AssistantLinks.loginUrl")(function* (
        owner: Owner,
        provider: string,
        assistantId: string
      ) {
        if (!isAssistantIdp(provider)) return yield* new LoginProviderNotFound()
        yield* findRow(owner, assistantId)
        const start = yield* oidc.begin(provider).pipe(
          Effect.catchTag("OidcUnknownProvider", () => Effect.fail(new LoginProviderNotFound())),
          Effect.catchTag("OidcLoginFailed", failed(provider))
        )
        const at = yield* now
        yield* sql`
          INSERT INTO assistant_link_flows (state, provider, assistant_id, account_id, code_verifier, nonce,
            redirect_uri, created_at)
          VALUES (${start.state}, ${provider}, ${assistantId}, ${owner.accountId}, ${start.codeVerifier},
            ${start.nonce}, ${start.redirectUri}, ${at})`.pipe(Sql.orDefect)
        // Flows nobody finished are swept as new ones begin.
        yield* sql`DELETE FROM assistant_link_flows WHERE created_at < ${new Date(at.getTime() - LINK_FLOW_TTL_MS)}`.pipe(
          Sql.orDefect
        )
        return { url: start.url, expiresAt: new Date(at.getTime() + LINK_FLOW_TTL_MS) }
      })

      const complete = Effect.fn("AssistantLinks.complete")(function* (provider: string, callbackUrl: URL) {
        if (!isAssistantIdp(provider)) return yield* new LoginProviderNotFound()
        const state = callbackUrl.searchParams.get("state") ?? ""
        // One use: the row is taken whatever happens next.
        const [flow] = yield* sql<{
          readonly assistant_id: string
          readonly account_id: string
          readonly code_verifier: string
          readonly nonce: string
          readonly redirect_uri: string
          readonly created_at: Date
        }>`DELETE FROM assistant_link_flows WHERE state = ${state} AND provider = ${provider} RETURNING *`.pipe(
          Sql.orDefect
        )
        const at = yield* now
        if (flow === undefined || at.getTime() - flow.created_at.getTime() > LINK_FLOW_TTL_MS)
          return yield* new LoginFailed()
        const identity = yield* redeem(oidc, provider, callbackUrl, state, flow)
        const link = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const [row] = yield* sql<{ readonly created_at: Date }>`
                INSERT INTO assistant_links (id, assistant_id, account_id, provider, subject, email, created_at)
                VALUES (${Crypto.randomUUID()}, ${flow.assistant_id}, ${flow.account_id}, ${provider},
                  ${identity.subject}, ${identity.email}, ${at})
                ON CONFLICT (assistant_id, provider, subject) DO UPDATE SET email = excluded.email
                RETURNING created_at`
              yield* audit.record(systemOwner(flow.account_id), {
                action: "assistant.linked",
                targetType: "assistant",
                targetId: flow.assistant_id,
                details: { provider, subject: identity.subject }
              })
              return row!
            })
          )
          .pipe(Sql.orDefect)
        return {
          object: "assistant_link" as const,
          assistant_id: flow.assistant_id,
          provider,
          subject: identity.subject,
          email: identity.email,
          created_at: link.created_at
        }
      })

      return AssistantLinks.of({ isAssistantIdp, loginUrl, complete })
    })
  )
}
