import { Context, type Effect, Layer, type Option, type Scope } from "effect"
import { collect } from "../../kernel/Plugins.ts"
import type { Principal } from "../../kernel/Owner.ts"

/**
 * A kind of bearer token a feature issues and vouches for (an assistant
 * runtime's): whether a token is one, and who it names while it is valid.
 */
export interface PrincipalResolver {
  readonly accepts: (token: string) => boolean
  readonly resolve: (token: string) => Effect.Effect<Option.Option<Principal>>
}

/**
 * The token kinds beside keys, access tokens and cookies, as the composition
 * root lists them: authentication asks the first that accepts a token.
 */
export class PrincipalResolvers extends Context.Service<
  PrincipalResolvers,
  ReadonlyArray<PrincipalResolver>
>()("rbs/policy/PrincipalResolvers") {
  static readonly layer = <Resolver extends Effect.Effect<PrincipalResolver, any, any>>(
    resolvers: ReadonlyArray<Resolver>
  ): Layer.Layer<
    PrincipalResolvers,
    Effect.Error<Resolver>,
    Exclude<Effect.Services<Resolver>, Scope.Scope>
  > => Layer.effect(PrincipalResolvers, collect(resolvers))
}
