import { useEffect, useState } from "preact/hooks"

export type Route =
  | { readonly page: "login" }
  | { readonly page: "register" }
  | { readonly page: "sessions" }
  | { readonly page: "session"; readonly id: string }
  | { readonly page: "keys" }
  | { readonly page: "usage" }
  | { readonly page: "billing" }
  | { readonly page: "webhooks" }
  | { readonly page: "organization" }
  | { readonly page: "audit" }

const SIMPLE = new Set([
  "login",
  "register",
  "sessions",
  "keys",
  "usage",
  "billing",
  "webhooks",
  "organization",
  "audit"
])

/** Hash routes (`#/sessions/<id>`): `/sessions/<id>` on the server is the session's CDP endpoint. */
export const parse = (hash: string): Route => {
  const [page, id] = hash.replace(/^#\/?/, "").split("/")
  if (page === "sessions" && id !== undefined && id !== "")
    return { page: "session", id: decodeURIComponent(id) }
  if (page !== undefined && SIMPLE.has(page)) return { page } as Route
  return { page: "sessions" }
}

export const href = (route: Route) =>
  route.page === "session" ? `#/sessions/${encodeURIComponent(route.id)}` : `#/${route.page}`

export const go = (route: Route) => {
  location.hash = href(route)
}

export const useRoute = () => {
  const [route, setRoute] = useState(() => parse(location.hash))
  useEffect(() => {
    const onChange = () => setRoute(parse(location.hash))
    addEventListener("hashchange", onChange)
    return () => removeEventListener("hashchange", onChange)
  }, [])
  return route
}
