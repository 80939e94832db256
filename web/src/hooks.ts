import { useCallback, useEffect, useState } from "preact/hooks"
import { ApiError } from "./api.ts"

export const messageOf = (error: unknown) =>
  error instanceof ApiError || error instanceof Error ? error.message : "Something went wrong."

export interface Loaded<A> {
  readonly data: A | undefined
  readonly error: string | undefined
  readonly loading: boolean
  readonly reload: () => void
}

/** Data a page shows: loaded when `deps` change, again on `reload`. */
export const useLoad = <A>(load: () => Promise<A>, deps: ReadonlyArray<unknown>): Loaded<A> => {
  const [state, setState] = useState<{ data?: A; error?: string; loading: boolean }>({ loading: true })
  const [round, setRound] = useState(0)
  useEffect(() => {
    let current = true
    setState((previous) => ({ ...previous, loading: true }))
    load().then(
      (data) => current && setState({ data, loading: false }),
      (error) => current && setState({ error: messageOf(error), loading: false })
    )
    return () => {
      current = false
    }
  }, [...deps, round])
  return {
    data: state.data,
    error: state.error,
    loading: state.loading,
    reload: useCallback(() => setRound((n) => n + 1), [])
  }
}

export interface Action {
  readonly busy: boolean
  readonly error: string | undefined
  /** Runs `work` unless another is running; its error is shown, not thrown. */
  readonly run: (work: () => Promise<unknown>) => Promise<void>
}

/** A button's request: busy while it runs, its error kept for display. */
export const useAction = (): Action => {
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<string>()
  const run = async (work: () => Promise<unknown>) => {
    if (busy) return
    setBusy(true)
    setError(undefined)
    try {
      await work()
    } catch (failure) {
      setError(messageOf(failure))
    } finally {
      setBusy(false)
    }
  }
  return { busy, error, run }
}
