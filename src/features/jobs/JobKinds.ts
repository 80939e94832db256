import { Context, Effect, Layer, type Scope } from "effect"
import { collect } from "../../kernel/Plugins.ts"
import type { JobKind } from "./JobKind.ts"

/**
 * The kinds of job this service runs, by name, as the composition root lists
 * them (each from its own module: the browser jobs, the exec job, the
 * workspace jobs). A library host may run its own beside (or instead of) the
 * built-in ones with `JobKinds.make`.
 */
export class JobKinds extends Context.Service<
  JobKinds,
  {
    readonly all: ReadonlyArray<JobKind>
    readonly get: (kind: string) => JobKind | undefined
  }
>()("rbs/jobs/JobKinds") {
  static readonly make = (kinds: ReadonlyArray<JobKind>) => {
    const byName = new Map(kinds.map((kind) => [kind.kind, kind]))
    return JobKinds.of({ all: kinds, get: (kind) => byName.get(kind) })
  }

  /** The kinds the modules give, each an Effect of its kinds. */
  static readonly layer = <Kinds extends Effect.Effect<ReadonlyArray<JobKind>, any, any>>(
    modules: ReadonlyArray<Kinds>
  ): Layer.Layer<JobKinds, Effect.Error<Kinds>, Exclude<Effect.Services<Kinds>, Scope.Scope>> =>
    Layer.effect(
      JobKinds,
      Effect.map(collect(modules), (built) => JobKinds.make(built.flat()))
    )
}
