// The service's API, same origin, with the dashboard cookie. Every error has the body
// `{ error: { code, message } }`: callers show `message` as it is.

const ACCOUNT_KEY = "rbs.account"

export class ApiError extends Error {
  readonly status: number
  readonly code: string
  constructor(status: number, code: string, message: string) {
    super(message)
    this.status = status
    this.code = code
  }
}

/** The active account (an organization's id), or null for the personal account. */
export const activeAccount = () => localStorage.getItem(ACCOUNT_KEY)

export const setActiveAccount = (id: string | null) => {
  if (id === null) localStorage.removeItem(ACCOUNT_KEY)
  else localStorage.setItem(ACCOUNT_KEY, id)
}

const send = async (method: string, path: string, body?: unknown): Promise<Response> => {
  const headers: Record<string, string> = {}
  if (body !== undefined) headers["content-type"] = "application/json"
  const account = activeAccount()
  if (account !== null && path.startsWith("/v1/")) headers["x-service-account"] = account
  const response = await fetch(path, {
    method,
    headers,
    credentials: "same-origin",
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  }).catch(() => {
    throw new ApiError(0, "network", "The service cannot be reached. Check your connection and try again.")
  })
  if (!response.ok) {
    const error = await response.json().catch(() => undefined)
    throw new ApiError(
      response.status,
      error?.error?.code ?? "http_error",
      error?.error?.message ?? `The service answered ${response.status}.`
    )
  }
  return response
}

export const api = {
  get: <A>(path: string) => send("GET", path).then((r) => r.json() as Promise<A>),
  post: <A>(path: string, body: unknown = {}) =>
    send("POST", path, body).then((r) => (r.status === 204 ? (undefined as A) : (r.json() as Promise<A>))),
  patch: <A>(path: string, body: unknown) => send("PATCH", path, body).then((r) => r.json() as Promise<A>),
  delete: (path: string) => send("DELETE", path).then(() => undefined),
  /** A POST answering bytes (a screenshot). */
  blob: (path: string, body: unknown = {}) => send("POST", path, body).then((r) => r.blob())
}

/** A query string of the values that are set. */
export const query = (values: Record<string, string | undefined>) => {
  const params = new URLSearchParams()
  for (const [name, value] of Object.entries(values))
    if (value !== undefined && value !== "") params.set(name, value)
  const text = params.toString()
  return text === "" ? "" : `?${text}`
}
