import { Context, Effect, Layer, type LogLevel, Option, Redacted, References } from "effect"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Url from "node:url"
import { oidcVariables, parseOidcProviders } from "./OidcProviders.ts"
import { type HostPort, hostPort } from "./HostPort.ts"
import * as ConfigEnv from "./ConfigEnv.ts"
import { isScryptCost, type ServiceConfigInput } from "./ConfigInput.ts"
import { makeTracingConfig, type TracingConfig } from "./TracingConfig.ts"
import { type CidrRange, parseCidrs } from "./Cidrs.ts"
import { IDLE_TIMEOUT_MAX_SECONDS, IDLE_TIMEOUT_MIN_SECONDS } from "../../kernel/Session.ts"

export type { ServiceConfigInput }

/**
 * Everything the service reads from its environment, resolved once while the
 * layers are built. Library hosts build it with `ServiceConfig.layer({...})`
 * and never touch `process.env`.
 */
export interface ServiceConfigShape {
  readonly host: string
  readonly port: number
  /** Base URL clients see, without a trailing slash. */
  readonly publicUrl: string
  /** Base of `cdp_url` (`ws://` or `wss://`), without a trailing slash. */
  readonly cdpBase: string
  /** Base of the preview stream URL, without a trailing slash. */
  readonly streamBase: string
  /** `GATEWAY_DOMAIN`, lower case, without dots around it; undefined: the path form only. */
  readonly gatewayDomain: string | undefined
  /** Absolute path of the data dir: embedded Postgres, profiles, secrets. */
  readonly dataDir: string
  /** External Postgres; `None` runs the embedded one in `dataDir`. */
  readonly databaseUrl: Option.Option<Redacted.Redacted<string>>
  readonly chromePath: string
  readonly browserPoolSize: number
  /** `MAX_BROWSERS`: browsers this node runs at most (0: none); `undefined` derives it from memory and cores. */
  readonly maxBrowsers: number | undefined
  /** What each browser may use (`BROWSER_MEMORY_MB`, `BROWSER_MAX_TASKS`, `BROWSER_OPEN_FILES`). */
  readonly browserLimits: {
    readonly memoryBytes: number
    readonly tasks: number
    readonly openFiles: number
  }
  /** First of the per-browser uids when the service runs as root (`BROWSER_UID_BASE`). */
  readonly browserUidBase: number
  /** `BROWSER_PROFILES_IN_MEMORY`: fresh profiles on a tmpfs; unset, when `/dev/shm` is one with room. */
  readonly browserProfilesInMemory: boolean | undefined
  /** The only variables a browser inherits (`TZ`, `LANG`, `LC_ALL`, `LC_CTYPE`): its clock and locale. */
  readonly browserEnv: Readonly<Record<string, string>>
  /**
   * Whether this process runs from the service's container image (`RBS_CONTAINER`, which its
   * Dockerfile sets): a refusal then names the container's options as the remedy
   * (`--security-opt systempaths=unconfined`, `--privileged`), not the machine's.
   */
  readonly inContainer: boolean
  /**
   * This node's name in session rows (`NODE_ID`): a restart reconciles only
   * its own sessions. `local` for the single runner; one of several nodes on
   * a shared database is named after its runner address unless named here.
   */
  readonly nodeId: string
  /**
   * `RUNNER_ADDRESS` (`host:port` other nodes reach this node's cluster runner
   * at) and `RUNNER_LISTEN` (what it binds, default the same): set, this node
   * is one of several; `None`, it is the single runner.
   */
  readonly runner: Option.Option<{
    readonly address: HostPort
    readonly listen: HostPort
    /**
     * `RUNNER_TLS_CA`, `RUNNER_TLS_CERT`, `RUNNER_TLS_KEY` (PEM files): nodes prove themselves on the
     * runner port with certificates of this CA; unset, with the key derived from `SECRETS_KEY`.
     */
    readonly tls: { readonly ca: string; readonly cert: string; readonly key: string } | undefined
  }>
  /** Several nodes: how often each says it is alive, and what follows from that (`NODE_HEARTBEAT_MS`). */
  readonly clusterTimings: ClusterTimings
  /**
   * `NODE_URL`: the base URL other nodes reach this node's HTTP server at
   * (relayed connections to sessions it owns). Default `http://<runner host>:<PORT>`
   * with a runner, else the public URL.
   */
  readonly nodeUrl: string
  /** `SECRETS_KEY`: the root of every key the service signs with, shared by all nodes. `None`: the database holds one. */
  readonly secretsKey: Option.Option<Redacted.Redacted<string>>
  /** Cookies get `Secure` when clients reach us over https. */
  readonly secureCookies: boolean
  /** How often the reaper looks for sessions past their TTL that no timer closed. */
  readonly reaperIntervalMs: number
  /** `SESSION_IDLE_TIMEOUT_SECONDS`: a session's idle timeout when its create names none; unset, none. */
  readonly sessionIdleTimeoutSeconds: number | undefined
  /** How often the disk of a workspace a session has open is measured into its `used_bytes`. */
  readonly workspaceMeasureMs: number
  /** The size of each workspace's own file system (`WORKSPACE_DISK_MB`); 0: a plain dir. */
  readonly workspaceDiskBytes: number
  /** How long a claimed job is its node's without a renewal (`JOB_LEASE_SECONDS`): a dead node's jobs wait this long. */
  readonly jobLeaseMs: number
  /**
   * How long a node stopped with SIGTERM keeps serving its live sessions
   * (`DRAIN_SECONDS`): 300 with several nodes, 0 (end them at once) on one.
   */
  readonly drainSeconds: number
  readonly logLevel: LogLevel.LogLevel
  /** Redis for rate limits shared across nodes; `None` keeps them in memory. */
  readonly redisUrl: Option.Option<Redacted.Redacted<string>>
  readonly egress: EgressConfig
  /** Credited once to each new account through the ledger (`SIGNUP_CREDIT_USD`), in micro-USD. */
  readonly signupCreditMicroUsd: bigint
  /** The scrypt cost (N) of password hashes made from now on (`PASSWORD_SCRYPT_N`); stored ones keep theirs. */
  readonly passwordScryptN: number
  /** Threads that hash and check passwords, apart from the ones DNS and files share (`PASSWORD_HASH_WORKERS`). */
  readonly passwordHashWorkers: number
  /**
   * `TRUSTED_PROXIES`: the reverse proxies whose `Forwarded` / `X-Forwarded-For` says who the client
   * is (for limits and the audit trail alike); from any other peer those headers are ignored.
   */
  readonly trustedProxies: ReadonlyArray<CidrRange>
  /** The header those proxies keep (`TRUSTED_PROXY_HEADER`); the other is never read. */
  readonly trustedProxyHeader: "x-forwarded-for" | "forwarded"
  /** Stripe for top-ups; `None` uses the local checkout provider. */
  readonly stripe: Option.Option<StripeConfig>
  /** OpenID Connect login providers (`OIDC_<NAME>_ISSUER`, `_CLIENT_ID`, `_CLIENT_SECRET`). */
  readonly oidcProviders: ReadonlyArray<OidcProviderInput>
  /** The OIDC provider (one of `oidcProviders`) through which people link themselves to assistants (`ASSISTANT_IDP`). */
  readonly assistantIdp: string | null
  /** Audit events older than this are deleted (`AUDIT_RETENTION_DAYS`). */
  readonly auditRetentionDays: number
  /** Finished jobs, with their attempts and results, are deleted this long after they end (`JOB_RETENTION_DAYS`). */
  readonly jobRetentionDays: number
  /** How long a preview token opens the live view (`PREVIEW_TOKEN_TTL_SECONDS`; never past the session's TTL). */
  readonly previewTokenTtlMs: number
  /** The built dashboard (`web/dist` of this package unless a host serves its own build). */
  readonly dashboardDir: string
  /** `BLOB_STORE`: where recordings (later snapshots, job results) are kept: a directory, or S3. */
  readonly blobStore: BlobStoreConfig
  /** Recordings older than this are deleted (`RECORDING_RETENTION_DAYS`). */
  readonly recordingRetentionDays: number
  /** Days a session's log is kept after the session ends. */
  readonly sessionLogRetentionDays: number
  /** A browser session's downloads are kept this long after it ends (`DOWNLOAD_RETENTION_HOURS`). */
  readonly downloadRetentionHours: number
  /** The largest image `POST /v1/images` pulls, in bytes as stored (`IMAGE_MAX_MB`). */
  readonly imageMaxBytes: number
  /** What a pulled image's layers may unpack to, in bytes (`IMAGE_MAX_UNPACKED_MB`). */
  readonly imageMaxUnpackedBytes: number
  /** `FFMPEG_PATH`: what encodes recordings. */
  readonly ffmpegPath: string
  /** Where spans are exported (OTLP/HTTP); undefined, nowhere. */
  readonly otel: TracingConfig | undefined
}

export interface OidcProviderInput {
  /** Lowercase, from `OIDC_<NAME>_...`: `/auth/<name>/login`. */
  readonly name: string
  readonly issuer: string
  readonly clientId: string
  readonly clientSecret: Redacted.Redacted<string>
}

export interface StripeConfig {
  readonly secretKey: Redacted.Redacted<string>
  /** Verifies `POST /v1/billing/stripe/webhook`; without it the webhook route refuses every event. */
  readonly webhookSecret: Redacted.Redacted<string> | undefined
  /** Stripe's API base (`https://api.stripe.com`); another only to test against a local server. */
  readonly apiUrl: string | undefined
}

export interface EgressConfig {
  /** `EGRESS_REGIONS`: `name=direct` or `name=<proxy URL>`, comma-separated; parsed by `EgressRegions`. */
  readonly regions: Redacted.Redacted<string> | undefined
  /** `EGRESS_DEFAULT_REGION`: the region of a session that names none (default: the first). */
  readonly defaultRegion: string | undefined
  /** `EGRESS_ALLOW_CIDRS`: destinations the SSRF guard lets through despite being private. */
  readonly allowCidrs: string
  /** `WEBHOOK_ALLOW_CIDRS`: the same exceptions for webhook URLs (and plain http to them). */
  readonly webhookAllowCidrs: string
  /** `REGISTRY_ALLOW_CIDRS`: the same exceptions for image registries (and plain http to them). */
  readonly registryAllowCidrs: string
  /**
   * `EGRESS_CONNECTIONS_PER_SESSION`: connections one session's proxy holds at once; each is a
   * descriptor of the service's, so more are closed as they come (a sandbox opens as many as it likes).
   */
  readonly connectionsPerSession: number
  /**
   * `BLOCK_ADS_LISTS`: the lists (Adblock Plus syntax, or hosts files) whose hosts a `block_ads`
   * session's proxy refuses; default EasyList and EasyPrivacy as Debian's uBlock Origin package ships them.
   */
  readonly blockAdsLists: ReadonlyArray<string>
}

/** EasyList and EasyPrivacy, from Debian's `webext-ublock-origin-chromium` (the set-up installs it). */
const AD_LISTS_DIR = "/usr/share/chromium/extensions/ublock-origin/assets/thirdparties/easylist"
export const DEFAULT_AD_LISTS = [`${AD_LISTS_DIR}/easylist.txt`, `${AD_LISTS_DIR}/easyprivacy.txt`]

const trustedProxies = (text: string) => {
  const { ranges, invalid } = parseCidrs(text)
  if (invalid.length > 0)
    throw new Error(`TRUSTED_PROXIES must be CIDRs or addresses, comma-separated: ${invalid.join(", ")}`)
  return ranges
}

/** The runner's certificates: all three files, or none (the shared key). */
const runnerTls = (input: ServiceConfigInput) => {
  const files = { ca: input.runnerTlsCa, cert: input.runnerTlsCert, key: input.runnerTlsKey }
  const given = Object.values(files).filter((file) => file !== undefined && file !== "")
  if (given.length === 0) return undefined
  if (given.length < 3)
    throw new Error("RUNNER_TLS_CA, RUNNER_TLS_CERT and RUNNER_TLS_KEY go together: set all three, or none")
  return files as { readonly ca: string; readonly cert: string; readonly key: string }
}

const idleTimeout = (seconds: number | undefined) => {
  if (seconds === undefined) return undefined
  if (!Number.isInteger(seconds) || seconds < IDLE_TIMEOUT_MIN_SECONDS || seconds > IDLE_TIMEOUT_MAX_SECONDS)
    throw new Error(
      `SESSION_IDLE_TIMEOUT_SECONDS must be an integer from ${IDLE_TIMEOUT_MIN_SECONDS} to ${IDLE_TIMEOUT_MAX_SECONDS}`
    )
  return seconds
}

const scryptCost = (n: number) => {
  if (!isScryptCost(n)) throw new Error("PASSWORD_SCRYPT_N must be a power of two from 1024 to 1048576")
  return n
}

const strongSecret = (key: string) => {
  if (key.length < 32)
    throw new Error("SECRETS_KEY must be at least 32 characters (for example `openssl rand -base64 32`)")
  return key
}

/** Where blobs live: a directory on this machine, or a bucket of an S3-compatible store. */
export type BlobStoreConfig =
  | { readonly _tag: "Directory"; readonly path: string }
  | {
      readonly _tag: "S3"
      readonly bucket: string
      /** Every key is stored under it: empty, or ending with `/`. */
      readonly prefix: string
      /** `S3_ENDPOINT` (MinIO, R2, ...); unset: AWS's own. Set, requests name the bucket in the path. */
      readonly endpoint: string | undefined
      readonly region: string
      /** `S3_ACCESS_KEY_ID` and `S3_SECRET_ACCESS_KEY`; unset: the AWS SDK's own lookup (its env, a role). */
      readonly credentials:
        { readonly accessKeyId: string; readonly secretAccessKey: Redacted.Redacted<string> } | undefined
    }

/**
 * `BLOB_STORE`: a directory (default `DATA_DIR/blobs`), or `s3://bucket/prefix`
 * with the `S3_*` settings. Throws, naming the variable, on anything else.
 */
const blobStoreOf = (input: ServiceConfigInput, dataDir: string): BlobStoreConfig => {
  const store = input.blobStore
  if (store === undefined || store === "") return { _tag: "Directory", path: Path.join(dataDir, "blobs") }
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(store)?.[1]
  if (scheme === undefined) return { _tag: "Directory", path: Path.resolve(store) }
  if (scheme.toLowerCase() !== "s3")
    throw new Error(`BLOB_STORE must be a directory or s3://bucket/prefix, not a ${scheme}:// URL`)
  const [bucket = "", ...rest] = store.slice("s3://".length).split("/")
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket))
    throw new Error(`BLOB_STORE: "${bucket}" is not an S3 bucket name (s3://bucket/prefix)`)
  const prefix = rest.filter((part) => part !== "").join("/")
  const keyId = input.s3AccessKeyId ?? ""
  const secret = input.s3SecretAccessKey ?? ""
  if ((keyId === "") !== (secret === ""))
    throw new Error("S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY go together: set both, or neither")
  return {
    _tag: "S3",
    bucket,
    prefix: prefix === "" ? "" : `${prefix}/`,
    endpoint:
      input.s3Endpoint === undefined || input.s3Endpoint === "" ? undefined : trimSlash(input.s3Endpoint),
    region: input.s3Region ?? "us-east-1",
    credentials: keyId === "" ? undefined : { accessKeyId: keyId, secretAccessKey: Redacted.make(secret) }
  }
}

const urlHost = (host: string) => (host.includes(":") ? `[${host}]` : host)

/** A node name from an address: letters, digits, `.`, `_` and `-` only. */
const nameOf = (text: string) => text.replace(/[^A-Za-z0-9._-]+/g, "-")

const trimSlash = (url: string) => url.replace(/\/+$/, "")

const toWs = (url: string) => url.replace(/^http(s?):\/\//, "ws$1://")

/**
 * A cluster node's drain by default: long enough for most automation runs to
 * end on their own (they last seconds to minutes), short enough for a
 * rolling deploy of a few nodes to take minutes, not hours. One node has nowhere else to send clients, and its
 * supervisor (systemd, Docker) kills it after 10-90 s: it stops at once.
 */
export const DRAIN_SECONDS_CLUSTER = 300

/**
 * The clock of several nodes, all from one beat (`NODE_HEARTBEAT_MS`, 2 s by
 * default): a node writes its heartbeat every beat; placement takes a node
 * whose last beat is within 3 beats; a node silent for 4 beats is lost (its
 * sessions end `node_lost`, swept every beat); a runner renews its shard
 * leases every 1.5 beats and they lapse after 5 (a dead node's singletons
 * move then); runners look for new shard assignments every 1.5 beats. A
 * shorter beat finds a dead node sooner and costs more writes; a beat shorter
 * than a node's longest stall (a busy machine) can lose a live node.
 */
export interface ClusterTimings {
  readonly heartbeatMs: number
  readonly placeableWithinMs: number
  readonly nodeLostAfterMs: number
  readonly shardLockRefreshMs: number
  readonly shardLockExpirationMs: number
  readonly refreshAssignmentsMs: number
}

export const DEFAULT_HEARTBEAT_MS = 2_000

/** OWASP's recommended scrypt cost for passwords (with r = 8, p = 1). */
export const DEFAULT_PASSWORD_SCRYPT_N = 2 ** 17

export const clusterTimings = (heartbeatMs: number = DEFAULT_HEARTBEAT_MS): ClusterTimings => ({
  heartbeatMs,
  placeableWithinMs: 3 * heartbeatMs,
  nodeLostAfterMs: 4 * heartbeatMs,
  shardLockRefreshMs: 1.5 * heartbeatMs,
  shardLockExpirationMs: 5 * heartbeatMs,
  refreshAssignmentsMs: 1.5 * heartbeatMs
})

/** Throws, with the variable's name, on a malformed `RUNNER_ADDRESS` / `RUNNER_LISTEN`. */
export const makeServiceConfig = (input: ServiceConfigInput): ServiceConfigShape => {
  const host = input.host ?? "127.0.0.1"
  const port = input.port ?? 8080
  // Bound to every address (`0.0.0.0`, `::`), the service is reached on this machine's loopback:
  // a URL that names the wildcard (`ws://0.0.0.0:8080/...`) is no use to a client as it is.
  const reachable = host === "" || host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host
  const publicUrl = trimSlash(input.publicUrl ?? `http://${urlHost(reachable)}:${port}`)
  const address =
    input.runnerAddress === undefined || input.runnerAddress === ""
      ? undefined
      : hostPort("RUNNER_ADDRESS", input.runnerAddress)
  const runner =
    address === undefined
      ? Option.none()
      : Option.some({
          address,
          listen:
            input.runnerListen === undefined || input.runnerListen === ""
              ? address
              : hostPort("RUNNER_LISTEN", input.runnerListen),
          tls: runnerTls(input)
        })
  const nodeId =
    input.nodeId !== undefined && input.nodeId !== ""
      ? input.nodeId
      : address !== undefined
        ? nameOf(`${address.host}-${address.port}`)
        : "local"
  return {
    host,
    port,
    publicUrl,
    cdpBase: trimSlash(input.cdpBase ?? toWs(publicUrl)),
    streamBase: trimSlash(input.streamBase ?? toWs(publicUrl)),
    gatewayDomain:
      input.gatewayDomain === undefined || input.gatewayDomain.trim() === ""
        ? undefined
        : input.gatewayDomain
            .trim()
            .toLowerCase()
            .replace(/^\.+|\.+$/g, ""),
    dataDir: Path.resolve(input.dataDir ?? ".data"),
    databaseUrl: Option.map(Option.fromNullishOr(input.databaseUrl), Redacted.make),
    chromePath: input.chromePath ?? "/usr/bin/chromium",
    browserPoolSize: input.browserPoolSize ?? 2,
    maxBrowsers: input.maxBrowsers,
    browserLimits: {
      memoryBytes: (input.browserMemoryMb ?? 2048) * 1024 * 1024,
      tasks: input.browserMaxTasks ?? 2048,
      openFiles: input.browserOpenFiles ?? 8192
    },
    browserUidBase: input.browserUidBase ?? 2_000_000_000,
    browserProfilesInMemory: input.browserProfilesInMemory,
    inContainer: input.inContainer ?? false,
    browserEnv: Object.fromEntries(
      Object.entries(input.browserEnv ?? {}).filter(
        (entry): entry is [string, string] => entry[1] !== undefined
      )
    ),
    nodeId,
    runner,
    clusterTimings: clusterTimings(input.nodeHeartbeatMs),
    nodeUrl: trimSlash(
      input.nodeUrl ?? (address === undefined ? publicUrl : `http://${urlHost(address.host)}:${port}`)
    ),
    secretsKey:
      input.secretsKey === undefined || input.secretsKey === ""
        ? Option.none()
        : Option.some(Redacted.make(strongSecret(input.secretsKey))),
    secureCookies: publicUrl.startsWith("https://"),
    reaperIntervalMs: input.reaperIntervalMs ?? 5000,
    sessionIdleTimeoutSeconds: idleTimeout(input.sessionIdleTimeoutSeconds),
    workspaceMeasureMs: (input.workspaceMeasureSeconds ?? 30) * 1000,
    workspaceDiskBytes: (input.workspaceDiskMb ?? 5120) * 1024 * 1024,
    jobLeaseMs: (input.jobLeaseSeconds ?? 60) * 1000,
    drainSeconds: input.drainSeconds ?? (address !== undefined ? DRAIN_SECONDS_CLUSTER : 0),
    logLevel: input.logLevel ?? "Info",
    redisUrl: Option.map(Option.fromNullishOr(input.redisUrl), Redacted.make),
    egress: {
      regions: input.egressRegions === undefined ? undefined : Redacted.make(input.egressRegions),
      defaultRegion: input.egressDefaultRegion,
      allowCidrs: input.egressAllowCidrs ?? "",
      webhookAllowCidrs: input.webhookAllowCidrs ?? "",
      registryAllowCidrs: input.registryAllowCidrs ?? "",
      connectionsPerSession: input.egressConnectionsPerSession ?? 512,
      blockAdsLists:
        input.blockAdsLists === undefined || input.blockAdsLists.trim() === ""
          ? DEFAULT_AD_LISTS
          : input.blockAdsLists
              .split(",")
              .map((path) => path.trim())
              .filter((path) => path !== "")
    },
    signupCreditMicroUsd: BigInt(Math.round(Math.max(0, input.signupCreditUsd ?? 0) * 1_000_000)),
    passwordScryptN: scryptCost(input.passwordScryptN ?? DEFAULT_PASSWORD_SCRYPT_N),
    passwordHashWorkers: input.passwordHashWorkers ?? Math.max(1, Math.floor(Os.availableParallelism() / 4)),
    trustedProxies: trustedProxies(input.trustedProxies ?? ""),
    trustedProxyHeader: input.trustedProxyHeader ?? "x-forwarded-for",
    stripe:
      input.stripeSecretKey === undefined || input.stripeSecretKey === ""
        ? Option.none()
        : Option.some({
            secretKey: Redacted.make(input.stripeSecretKey),
            webhookSecret:
              input.stripeWebhookSecret === undefined ? undefined : Redacted.make(input.stripeWebhookSecret),
            apiUrl: input.stripeApiUrl
          }),
    oidcProviders: (input.oidcProviders ?? []).map((provider) => ({
      ...provider,
      clientSecret: Redacted.isRedacted(provider.clientSecret)
        ? provider.clientSecret
        : Redacted.make(provider.clientSecret)
    })),
    assistantIdp: input.assistantIdp ?? null,
    auditRetentionDays: input.auditRetentionDays ?? 365,
    jobRetentionDays: input.jobRetentionDays ?? 30,
    previewTokenTtlMs: (input.previewTokenTtlSeconds ?? 600) * 1000,
    // From src/ and from the build in dist/ alike, the package's own web/dist.
    blobStore: blobStoreOf(input, Path.resolve(input.dataDir ?? ".data")),
    recordingRetentionDays: input.recordingRetentionDays ?? 30,
    sessionLogRetentionDays: input.sessionLogRetentionDays ?? 7,
    downloadRetentionHours: input.downloadRetentionHours ?? 24,
    imageMaxBytes: (input.imageMaxMb ?? 2048) * 1024 * 1024,
    imageMaxUnpackedBytes: (input.imageMaxUnpackedMb ?? 8192) * 1024 * 1024,
    ffmpegPath: input.ffmpegPath ?? "/usr/bin/ffmpeg",
    otel: makeTracingConfig(input),

    dashboardDir: Path.resolve(
      input.dashboardDir ?? Url.fileURLToPath(new URL("../../../web/dist", import.meta.url))
    )
  }
}

export { fromEnv } from "./ConfigEnv.ts"
export { isScryptCost } from "./ConfigInput.ts"

/**
 * The configuration as given (a host's object, or the environment read into
 * one): each module that owns settings of its own (`SandboxConfig`,
 * `ContextConfig`, `LimitsConfig`) resolves them from it into a tag of its own.
 */
export class ConfigInputs extends Context.Service<ConfigInputs, ServiceConfigInput>()(
  "rbs/Config/ConfigInputs"
) {}

/** This node within the service: its data dir, its name, where other nodes reach it. */
export interface NodeSettings {
  readonly dataDir: ServiceConfigShape["dataDir"]
  readonly nodeId: ServiceConfigShape["nodeId"]
  readonly nodeUrl: ServiceConfigShape["nodeUrl"]
  readonly runner: ServiceConfigShape["runner"]
  readonly clusterTimings: ServiceConfigShape["clusterTimings"]
}

/** `DATA_DIR`, `NODE_ID`, `NODE_URL`, `RUNNER_ADDRESS` / `RUNNER_LISTEN`. */
export class NodeConfig extends Context.Service<NodeConfig, NodeSettings>()("rbs/Config/NodeConfig") {}

/** The addresses clients are given: the API's, the CDP relay's, the live view's. */
export interface PublicUrlSettings {
  readonly publicUrl: string
  readonly cdpBase: string
  readonly streamBase: string
  /** `GATEWAY_DOMAIN` (see `ServiceConfigShape`). */
  readonly gatewayDomain: string | undefined
  /** Cookies get `Secure` when clients reach us over https. */
  readonly secureCookies: boolean
}

/** `PUBLIC_URL`, `CDP_BASE`, `STREAM_BASE`. */
export class PublicUrls extends Context.Service<PublicUrls, PublicUrlSettings>()("rbs/Config/PublicUrls") {}

/** What the HTTP server binds and serves: `HOST`, `PORT`, the dashboard's build. */
export class HttpConfig extends Context.Service<
  HttpConfig,
  { readonly host: string; readonly port: number; readonly dashboardDir: string }
>()("rbs/Config/HttpConfig") {}

export class ServiceConfig extends Context.Service<ServiceConfig, ServiceConfigShape>()(
  "rbs/Config/ServiceConfig"
) {
  /**
   * The whole configuration as given (`ConfigInputs`), resolved (`ServiceConfig`), the settings
   * every module shares (`NodeConfig`, `PublicUrls`, `HttpConfig`) and the platform's own
   * (`DatabaseConfig`, `RedisConfig`, `SecretsConfig`, `BlobsConfig`, `EgressSettings`,
   * `ClusterConfig`, `OtelConfig`); a feature or runtime resolves its own from `ServiceConfig`
   * into a tag beside it (`BrowserConfig`, `SandboxConfig`, ...).
   */
  static readonly layer = (input: ServiceConfigInput = {}) =>
    sharedLayer.pipe(
      Layer.provideMerge(
        Layer.merge(
          Layer.sync(ServiceConfig, () => makeServiceConfig(input)),
          Layer.succeed(ConfigInputs, input)
        )
      )
    )

  /**
   * The configuration provider's settings (the environment unless a host
   * provides another), including the login providers: `OIDC_<NAME>_*` names
   * are open-ended, so they are found by walking the provider.
   */
  static readonly layerFromEnv = Layer.unwrap(
    Effect.gen(function* () {
      const input = yield* ConfigEnv.fromEnv
      const oidcProviders = yield* oidcVariables.pipe(
        Effect.flatMap((variables) => Effect.fromResult(parseOidcProviders(variables))),
        Effect.orDie
      )
      return ServiceConfig.layer({ ...input, oidcProviders })
    })
  )

  /** The log level the configuration asks for, for the whole program. */
  static readonly layerLogLevel = Layer.unwrap(
    ServiceConfig.useSync((config) => Layer.succeed(References.MinimumLogLevel, config.logLevel))
  )
}

/** `DATABASE_URL`: an external Postgres; `None` runs the embedded one in the data dir. */
export class DatabaseConfig extends Context.Service<
  DatabaseConfig,
  { readonly databaseUrl: ServiceConfigShape["databaseUrl"] }
>()("rbs/Config/DatabaseConfig") {}

/** `REDIS_URL`: Redis for what nodes share in memory otherwise (rate limits). */
export class RedisConfig extends Context.Service<
  RedisConfig,
  { readonly redisUrl: ServiceConfigShape["redisUrl"] }
>()("rbs/Config/RedisConfig") {}

/** `SECRETS_KEY`: the root of every key the service signs with. */
export class SecretsConfig extends Context.Service<
  SecretsConfig,
  { readonly secretsKey: ServiceConfigShape["secretsKey"] }
>()("rbs/Config/SecretsConfig") {}

/** `BLOB_STORE` and `S3_*`: where blobs live. */
export class BlobsConfig extends Context.Service<BlobsConfig, { readonly blobStore: BlobStoreConfig }>()(
  "rbs/Config/BlobsConfig"
) {}

/** `EGRESS_*`, `WEBHOOK_ALLOW_CIDRS` and `REGISTRY_ALLOW_CIDRS`: the regions and the SSRF guard's exceptions. */
export class EgressSettings extends Context.Service<EgressSettings, EgressConfig>()(
  "rbs/Config/EgressSettings"
) {}

/** `DRAIN_SECONDS`: how long a node stopped with SIGTERM keeps serving its live sessions. */
export class ClusterConfig extends Context.Service<ClusterConfig, { readonly drainSeconds: number }>()(
  "rbs/Config/ClusterConfig"
) {}

/** `OTEL_*`: where spans are exported; undefined, nowhere. */
export class OtelConfig extends Context.Service<OtelConfig, { readonly otel: TracingConfig | undefined }>()(
  "rbs/Config/OtelConfig"
) {}

/** The settings every module shares, from the whole configuration. */
const sharedLayer = Layer.effectContext(
  Effect.map(Effect.service(ServiceConfig), (config) =>
    Context.make(NodeConfig, {
      dataDir: config.dataDir,
      nodeId: config.nodeId,
      nodeUrl: config.nodeUrl,
      runner: config.runner,
      clusterTimings: config.clusterTimings
    }).pipe(
      Context.add(PublicUrls, {
        publicUrl: config.publicUrl,
        cdpBase: config.cdpBase,
        streamBase: config.streamBase,
        gatewayDomain: config.gatewayDomain,
        secureCookies: config.secureCookies
      }),
      Context.add(HttpConfig, { host: config.host, port: config.port, dashboardDir: config.dashboardDir }),
      Context.add(DatabaseConfig, { databaseUrl: config.databaseUrl }),
      Context.add(RedisConfig, { redisUrl: config.redisUrl }),
      Context.add(SecretsConfig, { secretsKey: config.secretsKey }),
      Context.add(BlobsConfig, { blobStore: config.blobStore }),
      Context.add(EgressSettings, config.egress),
      Context.add(ClusterConfig, { drainSeconds: config.drainSeconds }),
      Context.add(OtelConfig, { otel: config.otel })
    )
  )
)

/** What `ServiceConfig.layer` provides: the configuration and every tag the platform reads from it. */
export type ConfigServices = Layer.Success<ReturnType<typeof ServiceConfig.layer>>
