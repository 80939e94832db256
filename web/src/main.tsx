import { render } from "preact"
import { useEffect, useState } from "preact/hooks"
import { activeAccount, api, ApiError, setActiveAccount } from "./api.ts"
import { ErrorText, Loading } from "./components.tsx"
import { messageOf } from "./hooks.ts"
import { Layout } from "./Layout.tsx"
import { type Me, MeContext } from "./me.ts"
import { Audit } from "./pages/Audit.tsx"
import { Billing } from "./pages/Billing.tsx"
import { Keys } from "./pages/Keys.tsx"
import { Login, Register } from "./pages/Login.tsx"
import { Organization } from "./pages/Organization.tsx"
import { SessionPage } from "./pages/Session.tsx"
import { Sessions } from "./pages/Sessions.tsx"
import { Usage } from "./pages/Usage.tsx"
import { Webhooks } from "./pages/Webhooks.tsx"
import { go, type Route, useRoute } from "./routes.ts"
import type { Account, User } from "./types.ts"
import "./styles.css"

type Login =
  | { readonly state: "loading" }
  | { readonly state: "out" }
  | { readonly state: "error"; readonly message: string }
  | {
      readonly state: "in"
      readonly user: User
      readonly accounts: ReadonlyArray<Account>
    }

const page = (route: Route) => {
  switch (route.page) {
    case "session":
      return <SessionPage id={route.id} />
    case "keys":
      return <Keys />
    case "usage":
      return <Usage />
    case "billing":
      return <Billing />
    case "webhooks":
      return <Webhooks />
    case "organization":
      return <Organization />
    case "audit":
      return <Audit />
    default:
      return <Sessions />
  }
}

const App = () => {
  const route = useRoute()
  const [login, setLogin] = useState<Login>({ state: "loading" })
  const [account, setAccount] = useState(activeAccount())

  const refresh = () =>
    api.get<{ user: User; accounts: ReadonlyArray<Account> }>("/auth/me").then(
      (me) => setLogin({ state: "in", ...me }),
      (error) =>
        setLogin(
          error instanceof ApiError && error.status === 401
            ? { state: "out" }
            : { state: "error", message: messageOf(error) }
        )
    )
  useEffect(() => void refresh(), [])

  if (login.state === "loading")
    return (
      <main id="main">
        <Loading what="your account" />
      </main>
    )
  if (login.state === "error")
    return (
      <main id="main">
        <ErrorText message={login.message} />
      </main>
    )
  if (login.state === "out") {
    const loggedIn = () => refresh().then(() => go({ page: "sessions" }))
    return route.page === "register" ? <Register onDone={loggedIn} /> : <Login onDone={loggedIn} />
  }
  if (route.page === "login" || route.page === "register") go({ page: "sessions" })
  const active = login.accounts.find((a) => a.id === account) ?? login.accounts.find((a) => a.personal)!
  const me: Me = {
    user: login.user,
    accounts: login.accounts,
    account: active,
    switchAccount: (id) => {
      const chosen = login.accounts.find((a) => a.id === id)
      setActiveAccount(chosen === undefined || chosen.personal ? null : id)
      setAccount(id)
      if (route.page === "session") go({ page: "sessions" })
    },
    logout: () => {
      void api.post("/auth/logout").finally(() => {
        setActiveAccount(null)
        setLogin({ state: "out" })
        go({ page: "login" })
      })
    }
  }
  return (
    <MeContext.Provider value={me}>
      <Layout route={route}>
        {/* Keyed by the account: switching it reloads the page's data. */}
        <div key={active.id}>{page(route)}</div>
      </Layout>
    </MeContext.Provider>
  )
}

render(<App />, document.getElementById("app")!)
