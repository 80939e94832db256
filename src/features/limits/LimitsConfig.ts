/** The spec's limits, each configurable (SPEC.md's values are the defaults). */
export interface LimitsConfig {
  /** `POST /v1/sessions` per account per minute. */
  readonly sessionCreatesPerMinute: number
  /** `POST /v1/sessions/{id}/screenshot` per session per minute. */
  readonly screenshotsPerMinute: number
  /** `POST /v1/sessions/{id}/preview-token` per session per minute. */
  readonly previewTokensPerMinute: number
  /** Webhook mutations (create, delete, rotate, replay, discard) per account per minute. */
  readonly webhookMutationsPerMinute: number
  /** Exec, stdin, kill and PTYs per principal per minute. */
  readonly execPerMinute: number
  /** Uploads and downloads per principal per minute. */
  readonly fileTransfersPerMinute: number
  /** Assistant creates, changes, pauses, resumes and credential writes per account per minute. */
  readonly assistantMutationsPerMinute: number
  /** `POST /v1/mcp` requests per principal per minute (the tools' own routes count theirs too). */
  readonly mcpRequestsPerMinute: number
  /** Live-view viewers of one session at once (`429 viewer_limit` beyond). */
  readonly viewersPerSession: number
  /** Open (`creating` or `ready`) sessions per account. */
  readonly concurrentSessions: number
  /** Job creates, cancels and retries per account per minute. */
  readonly jobMutationsPerMinute: number
  /** Workspace creates, renames, template toggles, deletes, snapshots and restores per account per minute. */
  readonly workspaceMutationsPerMinute: number
  /** What an account's workspaces and their snapshots may hold, in MB (`WORKSPACE_STORAGE_MB_PER_ACCOUNT`). */
  readonly workspaceStorageMb: number
  /** Jobs of one account running at once, across the nodes (more wait `queued`). */
  readonly concurrentJobs: number
  /** Jobs one node runs at once (each holds a session while it runs). */
  readonly jobsPerNode: number
  /** `POST /auth/login` attempts per email per minute. */
  readonly loginAttemptsPerEmail: number
  /** `POST /auth/login` attempts per client IP per minute. */
  readonly loginAttemptsPerIp: number
}

export const DEFAULT_LIMITS: LimitsConfig = {
  sessionCreatesPerMinute: 20,
  screenshotsPerMinute: 60,
  previewTokensPerMinute: 10,
  webhookMutationsPerMinute: 60,
  execPerMinute: 600,
  fileTransfersPerMinute: 120,
  mcpRequestsPerMinute: 600,
  assistantMutationsPerMinute: 60,
  viewersPerSession: 10,
  concurrentSessions: 10,
  jobMutationsPerMinute: 60,
  workspaceMutationsPerMinute: 60,
  workspaceStorageMb: 10_240,
  concurrentJobs: 4,
  jobsPerNode: 4,
  loginAttemptsPerEmail: 10,
  loginAttemptsPerIp: 30
}
