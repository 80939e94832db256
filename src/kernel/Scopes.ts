// No imports: the dashboard bundles this list too, so its scope checkboxes are the service's scopes.

/** The permission scopes a key may be limited to (the interface's authentication scopes). */
export const SCOPES = [
  "sessions.read",
  "sessions.write",
  "workspaces.read",
  "workspaces.write",
  "exec.write",
  "files.read",
  "files.write",
  "keys.read",
  "keys.write",
  "billing.read",
  "billing.write",
  "audit.read",
  "webhooks.read",
  "webhooks.write",
  "images.read",
  "images.write"
] as const
