/**
 * `rbs`: the operator's command line. `rbs serve` runs the service (as
 * `npm start` does), `rbs migrate` applies the database migrations, and
 * `rbs billing credit` grants a balance through the ledger, `rbs images
 * list` / `rbs images import` manage the sandbox image store. Configured from
 * the same environment as the service (DATA_DIR, DATABASE_URL, ...). `rbs
 * cleanup` removes what a service that died left on this machine when no
 * service is started on its data dir again. `rbs doctor` says which kinds of
 * session this node can run, and why not the others.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Console, Effect, Layer, Option, Schema } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { AccountHooks } from "../../features/identity/AccountHooks.ts"
import { SqlClient } from "effect/sql"
import { AccountsRepo } from "../../features/identity/AccountsRepo.ts"
import { Audit } from "../../features/audit/Audit.ts"
import { AuditConfig } from "../../features/audit/AuditConfig.ts"
import { UsersRepo } from "../../features/identity/UsersRepo.ts"
import { systemOwner } from "../../kernel/Owner.ts"
import { Billing } from "../../features/billing/Billing.ts"
import { WebhookOutbox } from "../../features/webhooks/Outbox.ts"
import { formatUsd } from "../../features/billing/Money.ts"
import { fromEnv, ServiceConfig } from "../../platform/config/Config.ts"
import * as Database from "../../platform/db/Database.ts"
import * as Migrations from "../../platform/db/Migrations.ts"
import { isUuid } from "../../kernel/Ids.ts"
import * as Images from "../../runtimes/sandbox/Images.ts"
import { SandboxConfig } from "../../runtimes/sandbox/SandboxConfig.ts"
import * as SandboxHost from "../../runtimes/sandbox/SandboxHost.ts"
import * as Runc from "../../runtimes/sandbox/Runc.ts"
import { BrowserConfig } from "../../runtimes/browser/BrowserConfig.ts"
import { browserAvailability } from "../../runtimes/browser/BrowserPool.ts"
import * as Chromium from "../../runtimes/browser/Chromium.ts"
import * as Cgroups from "../../runtimes/browser/Cgroups.ts"
import { contextAvailability, ContextConfig } from "../../runtimes/context/ContextConfig.ts"
import { profilesPlace, removeCellLeftovers } from "../../runtimes/browser/ProfilesPlace.ts"
import * as OwnerFile from "../../platform/db/OwnerFile.ts"
import { NodeConfig } from "../../platform/config/Config.ts"
import * as WorkspaceDisk from "../../features/workspaces/WorkspaceDisk.ts"
import * as FsSync from "node:fs"
import * as Path from "node:path"

class CliError extends Schema.TaggedError<CliError>()("CliError", { message: Schema.String }) {}

/** The service's configuration from the environment; the CLI logs only warnings unless LOG_LEVEL says otherwise. */
const ConfigLive = Layer.mergeAll(ServiceConfig.layerLogLevel, AuditConfig.layer).pipe(
  Layer.provideMerge(
    Layer.unwrap(
      Effect.map(fromEnv, (input) => ServiceConfig.layer({ ...input, logLevel: input.logLevel ?? "Warn" }))
    )
  )
)

/** The sandbox settings (its image store) from the same environment. */
const SandboxConfigLive = SandboxConfig.layer.pipe(Layer.provideMerge(ConfigLive))

const migrate = Command.make("migrate", {}, () =>
  Effect.gen(function* () {
    const applied = yield* Migrations.run()
    yield* Console.log(
      applied.length === 0
        ? "The database is up to date."
        : `Applied ${applied.map(([id, name]) => `${String(id).padStart(4, "0")}_${name}`).join(", ")}.`
    )
  }).pipe(Effect.provide(Database.layerClientShared.pipe(Layer.provideMerge(ConfigLive))))
).pipe(Command.withDescription("Apply the pending database migrations (the service also does at start)."))

// Dollars with up to six decimals: a micro-dollar is the smallest amount.
const Usd = Schema.String.check(Schema.isPattern(/^\d{1,9}(\.\d{1,6})?$/))

const credit = Command.make(
  "credit",
  {
    account: Flag.String("account").pipe(
      Flag.withDescription("The account's id, or a user's email (their personal account).")
    ),
    usd: Flag.String("usd").pipe(
      Flag.withSchema(Usd),
      Flag.withDescription("US dollars to credit, up to six decimals, e.g. 25 or 2.50.")
    ),
    reason: Flag.String("reason").pipe(Flag.withDescription("Why: kept in the ledger entry."))
  },
  Effect.fn(
    function* ({ account, usd, reason }) {
      const users = yield* UsersRepo
      const accounts = yield* AccountsRepo
      const billing = yield* Billing
      const audit = yield* Audit
      const sql = yield* SqlClient.SqlClient
      const [whole, fraction = ""] = usd.split(".")
      const amount = BigInt(whole!) * 1_000_000n + BigInt(fraction.padEnd(6, "0"))
      if (amount <= 0n) return yield* new CliError({ message: "--usd must be more than 0." })
      if (reason.trim() === "") return yield* new CliError({ message: "--reason must not be empty." })
      const accountId = account.includes("@")
        ? yield* Effect.flatMap(users.findByEmail(account.trim()), (found) =>
            Option.isSome(found)
              ? Effect.map(accounts.personalAccountId(found.value.user.id), Option.some)
              : Effect.succeed(Option.none<string>())
          )
        : isUuid(account) && Option.isSome(yield* accounts.find(account, "owner"))
          ? Option.some(account)
          : Option.none<string>()
      if (Option.isNone(accountId)) return yield* new CliError({ message: `No account ${account}.` })
      const result = yield* sql
        .withTransaction(
          Effect.gen(function* () {
            const result = yield* billing.credit({
              accountId: accountId.value,
              amount,
              kind: "grant",
              description: reason.trim()
            })
            yield* audit.record(systemOwner(accountId.value), {
              action: "billing.granted",
              targetType: "account",
              targetId: accountId.value,
              details: { amount_micro_usd: String(amount), reason: reason.trim() }
            })
            return result
          })
        )
        .pipe(Effect.orDie)
      yield* Console.log(
        `Credited ${formatUsd(amount)} USD to account ${accountId.value}. Balance: ${formatUsd(result.balance)} USD.`
      )
    },
    Effect.provide(
      Layer.mergeAll(Billing.layer, UsersRepo.layer, AccountsRepo.layer, Audit.layer).pipe(
        Layer.provide(AccountHooks.layerNone),
        Layer.provide(WebhookOutbox.layer),
        Layer.provideMerge(Database.layerShared),
        Layer.provideMerge(ConfigLive)
      )
    )
  )
).pipe(Command.withDescription("Credit an account's balance through the ledger (an operator grant)."))

const billing = Command.make("billing").pipe(
  Command.withDescription("Balances and the ledger."),
  Command.withSubcommands([credit])
)

const megabytes = (bytes: number) => `${(bytes / 1_000_000).toFixed(1)} MB`

const listImages = Command.make("list", {}, () =>
  Effect.gen(function* () {
    const config = yield* SandboxConfig
    const images = yield* Images.makeImages(config.imagesDir).list
    if (images.length === 0) {
      return yield* Console.log(`No images in ${config.imagesDir} (the set-up builds "debian").`)
    }
    const rows = images.map((image) => [
      image.name,
      image.digest.slice(0, 19),
      megabytes(image.bytes),
      image.created ?? "-"
    ])
    const header = ["NAME", "DIGEST", "SIZE", "CREATED"]
    const widths = header.map((title, i) => Math.max(title.length, ...rows.map((row) => row[i]!.length)))
    for (const row of [header, ...rows]) {
      yield* Console.log(
        row
          .map((cell, i) => cell.padEnd(widths[i]!))
          .join("  ")
          .trimEnd()
      )
    }
  }).pipe(Effect.provide(SandboxConfigLive))
).pipe(Command.withDescription("The sandbox images in this node's store (SANDBOX_IMAGES_DIR)."))

const importImage = Command.make(
  "import",
  {
    source: Argument.String("source").pipe(
      Argument.withDescription(
        "An OCI layout directory (dir or dir:tag) or a docker-archive tarball (`docker save` output)."
      )
    ),
    name: Flag.String("name").pipe(
      Flag.withDescription("The name sessions ask for in `image` (letters, digits, '.', '_', '-').")
    )
  },
  ({ source, name }) =>
    Effect.gen(function* () {
      const config = yield* SandboxConfig
      const resolved = yield* Effect.tryPromise({
        try: () => Images.importImage(config.imagesDir, source, name),
        catch: (cause) =>
          new CliError({
            message: `cannot import ${source}: ${cause instanceof Error ? cause.message : cause}`
          })
      })
      yield* Console.log(`Imported ${name} (${resolved.digest}) into ${config.imagesDir}.`)
    }).pipe(Effect.provide(SandboxConfigLive))
).pipe(
  Command.withDescription(
    "Add an image to this node's store (each node runs sandboxes from its own store: import on every node)."
  )
)

const images = Command.make("images").pipe(
  Command.withDescription("Sandbox images."),
  Command.withSubcommands([listImages, importImage])
)

const plural = (count: number, one: string, many: string) => `${count} ${count === 1 ? one : many}`

/**
 * What a service of this data dir left when it died and no service was
 * started on the data dir again: its sandboxes (containers, their mounts and
 * dirs) and any browser still running on its profiles. It holds the data
 * dir's service lock meanwhile, so it never touches a running service's.
 */
const cleanup = Command.make("cleanup", {}, () =>
  Effect.gen(function* () {
    const { dataDir } = yield* NodeConfig
    const browsers = yield* BrowserConfig
    const sandboxes = yield* SandboxConfig
    if (!FsSync.existsSync(dataDir))
      return yield* Console.log(`Nothing to remove: ${dataDir} does not exist.`)
    const lock = Path.join(dataDir, "service.pid")
    const claimed = yield* Effect.promise(() => OwnerFile.claim(lock))
    if (claimed._tag === "Taken") {
      return yield* new CliError({
        message: `a service (pid ${claimed.owner}) is running from ${dataDir}: it removes its own when it stops`
      })
    }
    return yield* Effect.gen(function* () {
      let processes = 0
      const placed = profilesPlace(dataDir, browsers.browserProfilesInMemory)
      if (typeof placed !== "string") {
        processes = (yield* Chromium.reapOrphans(placed.profilesDir)).processes
        yield* Effect.promise(() => removeCellLeftovers(placed).catch(() => 0))
        // Its browsers' cgroups: empty once they are reaped, and left behind by a process that died.
        yield* Effect.promise(() => Cgroups.removeLeftovers(placed.tag))
      }
      let containers = 0
      const paths = SandboxHost.hostPaths(dataDir)
      if (process.getuid?.() === 0 && FsSync.existsSync(paths.socketsDir)) {
        const runc = Runc.make(sandboxes.runcPath, paths.runcRoot)
        containers = yield* Effect.tryPromise({
          try: () => SandboxHost.removeLeftovers(runc, paths),
          catch: (cause) =>
            new CliError({
              message: cause instanceof Error ? cause.message : `cannot remove sandboxes: ${cause}`
            })
        })
        yield* Effect.promise(() => SandboxHost.removeHostDirs(paths))
      }
      // Workspace disks stay mounted after a process that died; their content is kept.
      const disks = yield* Effect.promise(async () =>
        process.getuid?.() === 0
          ? (await WorkspaceDisk.unmount(Path.join(dataDir, "workspaces"))) +
            (await WorkspaceDisk.unmount(Path.join(dataDir, "workspace-disks")))
          : 0
      )
      if (disks > 0) yield* Console.log(`Unmounted ${plural(disks, "workspace disk", "workspace disks")}.`)
      yield* Console.log(
        processes + containers === 0
          ? `Nothing was left running by a service of ${dataDir}.`
          : `Removed ${plural(processes, "browser process", "browser processes")} and ${plural(containers, "sandbox container", "sandbox containers")} left by a service of ${dataDir}.`
      )
    }).pipe(Effect.ensuring(Effect.promise(() => OwnerFile.release(lock))))
  }).pipe(
    Effect.provide(
      Layer.mergeAll(SandboxConfig.layer, BrowserConfig.layer).pipe(Layer.provideMerge(ConfigLive))
    )
  )
).pipe(
  Command.withDescription(
    "Remove what a service of DATA_DIR left when it died (its sandboxes' containers and mounts, any browser of it still running; its workspace disks unmounted, their content kept), without starting it. Refused while a service runs from DATA_DIR."
  )
)

/**
 * Which kinds of session this node can run, and why not the others: the
 * checks the service makes at start (`MAX_*`, a Chromium at `CHROME_PATH`,
 * the sandboxes' host and image), nothing started (no database, no browser,
 * no image built), whatever it finds (exit 0).
 */
const doctor = Command.make("doctor", {}, () =>
  Effect.gen(function* () {
    const browser = browserAvailability(yield* BrowserConfig)
    const kinds = [
      ["browser", browser],
      ["context", contextAvailability(yield* ContextConfig, browser)],
      ["sandbox", yield* SandboxHost.sandboxAvailability(yield* SandboxConfig)]
    ] as const
    for (const [kind, availability] of kinds) {
      yield* Console.log(
        availability.available ? `${kind}  runs here` : `${kind}  does not run here: ${availability.reason}`
      )
    }
  }).pipe(
    Effect.provide(
      Layer.mergeAll(SandboxConfig.layer, BrowserConfig.layer, ContextConfig.layer).pipe(
        Layer.provideMerge(ConfigLive)
      )
    )
  )
).pipe(
  Command.withDescription(
    "Say which kinds of session (browser, context, sandbox) this node can run and why not the others, as the service would find at start, without starting anything."
  )
)

/**
 * `rbs` and its commands; `service` is what `rbs serve` runs, given by the
 * composition root (`main/rbs.ts`). A user's mistake is one line on stderr
 * and exit code 1, not a stack trace.
 */
export const run = <E, R>(service: Effect.Effect<void, E, R>) => {
  const serve = Command.make("serve", {}, () => service).pipe(
    Command.withDescription(
      "Run the service (REST API, CDP relay, browser pool) until SIGINT, or SIGTERM and its drain (DRAIN_SECONDS)."
    )
  )
  return Command.make("rbs").pipe(
    Command.withDescription(
      "Remote browser service: serve it, migrate its database, administer balances, manage sandbox images, clean up after a dead service, check what this node can run."
    ),
    Command.withSubcommands([serve, migrate, billing, images, cleanup, doctor]),
    Command.run({ version: "0.1.0" }),
    Effect.catchIf(Schema.is(CliError), (error) =>
      Effect.andThen(
        Console.error(`rbs: ${error.message}`),
        Effect.sync(() => {
          process.exitCode = 1
        })
      )
    ),
    Effect.provide(NodeServices.layer)
  )
}
