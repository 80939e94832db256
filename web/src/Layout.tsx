import type { ComponentChildren } from "preact"
import { useState } from "preact/hooks"
import { useMe } from "./me.ts"
import { href, type Route } from "./routes.ts"

const NAV: ReadonlyArray<{ readonly route: Route; readonly label: string }> = [
  { route: { page: "sessions" }, label: "Sessions" },
  { route: { page: "keys" }, label: "API keys" },
  { route: { page: "usage" }, label: "Usage" },
  { route: { page: "billing" }, label: "Billing" },
  { route: { page: "webhooks" }, label: "Webhooks" },
  { route: { page: "organization" }, label: "Organization" },
  { route: { page: "audit" }, label: "Audit events" }
]

const current = (route: Route, item: Route) =>
  route.page === item.page || (route.page === "session" && item.page === "sessions")

/** The logged-in frame: who and which account, the pages, and the page itself. */
export const Layout = ({
  route,
  children
}: {
  readonly route: Route
  readonly children: ComponentChildren
}) => {
  const me = useMe()
  const [menuOpen, setMenuOpen] = useState(false)
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <div class="brand">Remote Browser Service</div>
        <button
          type="button"
          class="menu-button secondary"
          aria-expanded={menuOpen}
          aria-controls="nav"
          onClick={() => setMenuOpen(!menuOpen)}
        >
          Menu
        </button>
        <div class={`who ${menuOpen ? "open" : ""}`}>
          <span class="email" aria-label="Logged in as">
            {me.user.email}
          </span>
          <label class="account">
            <span class="visually-hidden">Active account</span>
            <select value={me.account.id} onChange={(e) => me.switchAccount(e.currentTarget.value)}>
              {me.accounts.map((account) => (
                <option value={account.id} key={account.id}>
                  {account.personal ? `Personal (${account.role})` : `${account.name} (${account.role})`}
                </option>
              ))}
            </select>
          </label>
          <button type="button" class="secondary" onClick={me.logout}>
            Log out
          </button>
        </div>
      </header>
      <nav id="nav" aria-label="Pages" class={menuOpen ? "open" : ""}>
        <ul>
          {NAV.map((item) => (
            <li key={item.label}>
              <a
                href={href(item.route)}
                aria-current={current(route, item.route) ? "page" : undefined}
                onClick={() => setMenuOpen(false)}
              >
                {item.label}
              </a>
            </li>
          ))}
        </ul>
      </nav>
      <main id="main">{children}</main>
    </>
  )
}
