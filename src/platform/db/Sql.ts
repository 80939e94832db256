import { Effect, Schema } from "effect"
import { SqlError } from "effect/sql"

/**
 * The database's failure policy, stated once: a statement that fails (`SqlError`: the database
 * away, a deadlock, a broken query) or a row that does not decode with the schema it is read with
 * (`SchemaError`: the table holds what the code never wrote) is a defect. The request it served
 * fails as a 500 `internal_error` and the defect is logged, as any other; no use case declares it.
 *
 * A domain that cares about one failure (a unique violation it answers with 409, a serialization
 * failure it retries) catches it inside, before the policy applies: the policy only sees what is
 * left. The domain's own errors (`InvalidField`, `KeyNotFound`, ...) pass through it typed.
 */
export type Infrastructure = SqlError.SqlError | Schema.SchemaError

/** The errors of `E` that the policy leaves typed: all but its `Infrastructure`. */
export type Domain<E> = Exclude<E, Extract<E, Infrastructure>>

const isInfrastructure = (error: unknown): error is Infrastructure =>
  SqlError.isSqlError(error) || Schema.isSchemaError(error)

/**
 * The policy on one effect: its `SqlError` and `SchemaError` become defects, its other errors stay
 * (with their cause). For a statement or a transaction of a service; a repository applies
 * `defects` once instead.
 */
export const orDefect = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, Domain<E>, R> => {
  // Bound first: inferred from the declared return type, catchIf's optional `orElse` goes astray.
  const caught = Effect.catchIf(
    effect,
    (error): error is Extract<E, Infrastructure> => isInfrastructure(error),
    Effect.die
  )
  return caught
}

/** A service whose methods (and effect-valued properties) no longer fail with `Infrastructure`. */
export type Defects<S> = {
  readonly [K in keyof S]: S[K] extends (...args: infer P) => Effect.Effect<infer A, infer E, infer R>
    ? (...args: P) => Effect.Effect<A, Domain<E>, R>
    : S[K] extends Effect.Effect<infer A, infer E, infer R>
      ? Effect.Effect<A, Domain<E>, R>
      : S[K]
}

/**
 * The policy on a whole repository: every method's effect goes through `orDefect`, so its
 * statements need no `Effect.orDie` of their own and its interface declares only what the domain
 * cares about. The layer applies it once: `XRepo.of(Sql.defects({ ... }))`.
 */
export const defects = <S extends object>(service: S): Defects<S> =>
  Object.fromEntries(
    Object.entries(service as Record<string, unknown>).map(([key, value]) => [
      key,
      typeof value === "function"
        ? (...args: ReadonlyArray<unknown>) => {
            const result: unknown = value.apply(service, args)
            return Effect.isEffect(result) ? orDefect(result) : result
          }
        : Effect.isEffect(value)
          ? orDefect(value)
          : value
    ])
  ) as Defects<S>

/**
 * The policy on a transaction that wraps a caller's effect of any error type (`E` is the caller's,
 * a `SchemaError` in it may be a 400 the caller answers): only the statements' `SqlError` becomes a
 * defect.
 */
export const sqlErrorOrDefect = <A, E, R>(
  effect: Effect.Effect<A, E | SqlError.SqlError, R>
): Effect.Effect<A, Exclude<E, SqlError.SqlError>, R> => {
  const caught = Effect.catchIf(effect, SqlError.isSqlError, Effect.die)
  return caught
}
