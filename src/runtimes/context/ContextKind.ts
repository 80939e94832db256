import { Effect } from "effect"
import type { KindDescriptor } from "../../runtime/SessionKinds.ts"
import { browserKind } from "../browser/BrowserKind.ts"

/**
 * A browser session in a fresh context of a Chromium the account's context
 * sessions share (`isolation: "context"`): a browser session to its clients,
 * with no workspace (a profile is a whole browser's).
 */
export const descriptor = Effect.succeed<KindDescriptor>({
  ...browserKind,
  kind: "context",
  isolation: "context",
  // A context of a shared browser: the browser's launch and its windows' size are not its own.
  accepts: { ...browserKind.accepts, workspace: false, viewport: false, identity: false }
})
