import { Effect } from "effect"

/**
 * Builds the plugins a composition root lists for a registry (runtime pools,
 * session kinds, job kinds, drain waits), each an Effect of its plugin, in
 * order: the registry's layer needs what any of them needs.
 */
export const collect = <Plugin extends Effect.Effect<any, any, any>>(
  plugins: ReadonlyArray<Plugin>
): Effect.Effect<Array<Effect.Success<Plugin>>, Effect.Error<Plugin>, Effect.Services<Plugin>> =>
  Effect.forEach(
    plugins,
    (plugin): Effect.Effect<Effect.Success<Plugin>, Effect.Error<Plugin>, Effect.Services<Plugin>> => plugin
  )
