import { createContext } from "preact"
import { useContext } from "preact/hooks"
import type { Account, User } from "./types.ts"

/** Who is logged in, their accounts, and the one the dashboard acts on. */
export interface Me {
  readonly user: User
  readonly accounts: ReadonlyArray<Account>
  readonly account: Account
  readonly switchAccount: (id: string) => void
  readonly logout: () => void
}

export const MeContext = createContext<Me | undefined>(undefined)

export const useMe = (): Me => {
  const me = useContext(MeContext)
  if (me === undefined) throw new Error("useMe outside a logged-in page")
  return me
}

/** Whether the active role may do what `permission` covers (the service decides; this hides what it would refuse). */
export const can = (me: Me, permission: "write" | "admin") =>
  permission === "write"
    ? me.account.role !== "viewer"
    : me.account.role === "admin" || me.account.role === "owner"
