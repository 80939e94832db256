import { Cause, Clock, Context, Effect, Exit, FiberMap, Layer, Option, Redacted, Schema } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { Audit } from "../audit/Audit.ts"
import { AccountBounds } from "../limits/AccountBounds.ts"
import { type InvalidField, type ResourceLimitReached } from "../../kernel/Errors.ts"
import {
  type CreateImageRequest,
  IMAGE_NAME,
  ImageExists,
  type ImageInfo,
  ImageNotFound,
  type ImagePullFailure,
  InvalidImageReference
} from "../../kernel/Image.ts"
import type { Owner } from "../../kernel/Owner.ts"
import { BlobStore } from "../../platform/blobs/BlobStore.ts"
import { NodeConfig } from "../../platform/config/Config.ts"
import * as Sealed from "../../platform/crypto/Sealed.ts"
import { Secrets } from "../../platform/crypto/Secrets.ts"
import { newestFirst } from "../../platform/db/Paging.ts"
import * as Sql from "../../platform/db/Sql.ts"
import { Egress } from "../../platform/net/Egress.ts"
import * as Housekeeping from "../../platform/work/Housekeeping.ts"
import { checkRegistry, pull, PullFailed, type RegistryProblem, unpackArchive } from "./ImagePull.ts"
import * as ImageReference from "./ImageReference.ts"
import { ImagesConfig } from "./ImagesConfig.ts"

const Row = Schema.Struct({
  id: Schema.String,
  account_id: Schema.String,
  name: Schema.String,
  reference: Schema.String,
  status: Schema.Literals(["pulling", "ready", "failed"]),
  digest: Schema.NullOr(Schema.String),
  bytes: Schema.NullOr(Schema.BigInt),
  error_code: Schema.NullOr(Schema.String),
  error_message: Schema.NullOr(Schema.String),
  created_at: Schema.Date,
  ready_at: Schema.NullOr(Schema.Date)
})
type Row = typeof Row.Type
const decodeRows = Effect.flatMap(Schema.decodeUnknownEffect(Schema.Array(Row)))

// Never `SELECT *`: the sealed credentials stay in the table, out of every row read for an answer.
const COLUMNS =
  "id, account_id, name, reference, status, digest, bytes, error_code, error_message, created_at, ready_at"

const toInfo = (row: Row): ImageInfo => ({
  id: row.id,
  object: "image",
  name: row.name,
  reference: row.reference,
  status: row.status,
  digest: row.digest,
  bytes: row.bytes === null ? null : Number(row.bytes),
  error:
    row.status === "failed"
      ? {
          code: (row.error_code ?? "image_pull_failed") as ImagePullFailure,
          message: row.error_message ?? ""
        }
      : null,
  created_at: row.created_at,
  ready_at: row.ready_at
})

const ID = /^img_[0-9a-f]{32}$/

/** The blob an image's OCI layout is kept in, tarred: its own, so removing it never touches another's. */
const blobKeyOf = (id: string) => `images/${id}.tar`

/** How long a pull's lease lasts unrenewed: a node that dies mid-pull leaves it `pulling` this long at most. */
const LEASE_MS = 60_000

const Credentials = Schema.fromJsonString(Schema.Struct({ username: Schema.String, password: Schema.String }))
const encodeCredentials = Schema.encodeSync(Credentials)
const decodeCredentials = Schema.decodeUnknownSync(Credentials)

/**
 * The images of an account, pulled from registries: `POST /v1/images` checks the reference and
 * its registry's addresses, keeps the row `pulling` (the credentials sealed beside it) and answers
 * at once; the pull runs on the node that took the request, under a lease it renews, and ends
 * `ready` (the OCI layout tarred into the blob store) or `failed` (why, in `error`), the
 * credentials erased either way. Any node runs a ready image: fetched from the blob store and
 * unpacked the first time (`local`).
 */
export class AccountImages extends Context.Service<
  AccountImages,
  {
    readonly create: (
      owner: Owner,
      input: CreateImageRequest
    ) => Effect.Effect<ImageInfo, InvalidField | InvalidImageReference | ImageExists | ResourceLimitReached>
    readonly list: (
      owner: Owner,
      page: { readonly cursor: string | undefined; readonly limit: number }
    ) => Effect.Effect<
      { readonly data: ReadonlyArray<ImageInfo>; readonly nextCursor: string | null },
      InvalidField
    >
    readonly get: (owner: Owner, id: string) => Effect.Effect<ImageInfo, ImageNotFound>
    readonly remove: (owner: Owner, id: string) => Effect.Effect<void, ImageNotFound>
    readonly find: (
      accountId: string,
      name: string
    ) => Effect.Effect<
      Option.Option<{ readonly id: string; readonly status: "pulling" | "ready" | "failed" }>
    >
    readonly local: (
      accountId: string,
      id: string
    ) => Effect.Effect<{ readonly dir: string; readonly ref: string }, ImageNotFound>
    /** Removes this node's copies of images that are no more (run every 5 minutes); answers how many. */
    readonly prune: Effect.Effect<number>
  }
>()("rbs/images/AccountImages") {
  static readonly layer = Layer.effect(
    AccountImages,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const audit = yield* Audit
      const bounds = yield* AccountBounds
      const blobs = yield* BlobStore
      const egress = yield* Egress
      const { dataDir, nodeId } = yield* NodeConfig
      const config = yield* ImagesConfig
      const key = Redacted.value((yield* Secrets).secretsAtRestKey)
      const guard = { policy: egress.registryPolicy, allowed: egress.registryAllowed }
      const pulls = yield* FiberMap.make<string>()
      const cacheDir = Path.join(dataDir, "account-images")
      const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

      const countOf = (accountId: string) =>
        sql<{
          readonly n: number
        }>`SELECT count(*)::int AS n FROM images WHERE account_id = ${accountId}`.pipe(
          Effect.map((rows) => rows[0]?.n ?? 0),
          Sql.orDefect
        )

      const fail = (id: string, error: PullFailed) =>
        sql`
          UPDATE images SET status = 'failed', error_code = ${error.code}, error_message = ${error.detail},
            credentials_sealed = NULL, pulled_by = NULL, locked_until = NULL
          WHERE id = ${id} AND status = 'pulling'`.pipe(Sql.orDefect, Effect.asVoid)

      /** One pull, start to end, on this node: what `create` forks once the row is in. */
      const pullOne = (id: string, reference: ImageReference.ImageReference) =>
        Effect.gen(function* () {
          const [stored] = yield* sql<{ readonly credentials_sealed: string | null }>`
            SELECT credentials_sealed FROM images WHERE id = ${id} AND status = 'pulling'`.pipe(Sql.orDefect)
          if (stored === undefined) return
          const credentials =
            stored.credentials_sealed === null
              ? undefined
              : decodeCredentials(Sealed.decrypt(key, stored.credentials_sealed))
          // The lease, renewed while the pull runs: a node that dies leaves it to the sweep.
          yield* Effect.gen(function* () {
            const at = yield* Clock.currentTimeMillis
            yield* sql`UPDATE images SET locked_until = ${new Date(at + LEASE_MS)} WHERE id = ${id} AND status = 'pulling'`.pipe(
              Sql.orDefect
            )
          }).pipe(Effect.andThen(Effect.sleep(LEASE_MS / 3)), Effect.forever, Effect.forkScoped)
          // Checked again at the pull: what the name resolves to may have changed since the create.
          const { insecure } = yield* checkRegistry(reference, guard).pipe(
            Effect.tapError((problem) => logRefused(problem)),
            Effect.mapError(
              () =>
                new PullFailed({
                  code: "image_pull_failed",
                  detail: "The registry is not an address this service may reach."
                })
            )
          )
          const dir = yield* Effect.acquireRelease(
            Effect.promise(async () => {
              const dir = Path.join(dataDir, "tmp", `image-${id}-${Crypto.randomBytes(4).toString("hex")}`)
              await Fs.mkdir(dir, { recursive: true, mode: 0o700 })
              return dir
            }),
            (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
          )
          // Every connection of the pull's (each redirect hop included) is checked by the guard.
          const pulled = yield* pull({
            reference,
            credentials,
            guard,
            insecure,
            dir,
            maxBytes: config.maxBytes,
            maxUnpackedBytes: config.maxUnpackedBytes
          }).pipe(Effect.annotateLogs({ imageId: id }))
          yield* blobs.putFile(blobKeyOf(id), pulled.archive)
          const at = yield* now
          const updated = yield* sql`
            UPDATE images SET status = 'ready', digest = ${pulled.digest}, bytes = ${pulled.bytes}, ready_at = ${at},
              credentials_sealed = NULL, pulled_by = NULL, locked_until = NULL
            WHERE id = ${id} AND status = 'pulling' RETURNING id`.pipe(Sql.orDefect)
          // Deleted (or swept) meanwhile: its archive goes too.
          if (updated.length === 0) yield* blobs.remove(blobKeyOf(id))
          else
            yield* Effect.logInfo("image.pulled", { imageId: id, digest: pulled.digest, bytes: pulled.bytes })
        }).pipe(
          Effect.scoped,
          Effect.catchTag("PullFailed", (error) =>
            Effect.logInfo("image.pull_failed", { imageId: id, code: error.code }).pipe(
              Effect.andThen(fail(id, error))
            )
          ),
          Effect.onExit((exit) =>
            Exit.isFailure(exit) && !Cause.hasInterruptsOnly(exit.cause)
              ? Effect.logError("image.pull_crashed", { imageId: id, cause: exit.cause }).pipe(
                  Effect.andThen(
                    fail(
                      id,
                      new PullFailed({
                        code: "image_pull_failed",
                        detail: "The pull failed on the service's side."
                      })
                    )
                  )
                )
              : Effect.void
          ),
          Effect.ignore
        )

      const logRefused = (problem: RegistryProblem) =>
        Effect.logInfo("image.registry_refused", {
          reason: problem._tag === "Refused" ? `${problem.address} (${problem.reason})` : "does not resolve"
        })

      const create = Effect.fn("AccountImages.create")(function* (owner: Owner, input: CreateImageRequest) {
        const parsed = ImageReference.parse(input.reference)
        if ("refused" in parsed) return yield* new InvalidImageReference({ reason: parsed.refused })
        const name = input.name ?? ImageReference.defaultName(parsed)
        if (!IMAGE_NAME.test(name))
          return yield* new InvalidImageReference({
            reason: "a name is letters, digits, '_', '.' and '-', up to 128 characters"
          })
        if (input.credentials !== undefined) {
          const { username, password } = input.credentials
          if (
            username.length === 0 ||
            username.length > 512 ||
            password.length > 4096 ||
            /[:\n]/.test(username)
          )
            return yield* new InvalidImageReference({
              reason: "credentials are a username (no ':') and a password, up to 512 and 4096 characters"
            })
        }
        yield* checkRegistry(parsed, guard).pipe(
          Effect.tapError(logRefused),
          Effect.mapError(
            () =>
              new InvalidImageReference({ reason: "its registry is not an address this service may reach" })
          )
        )
        const id = `img_${Crypto.randomUUID().replaceAll("-", "")}`
        const at = yield* now
        const sealed =
          input.credentials === undefined ? null : Sealed.encrypt(key, encodeCredentials(input.credentials))
        const info = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              yield* bounds.reserve("images", owner.accountId, countOf(owner.accountId))
              const taken =
                yield* sql`SELECT 1 FROM images WHERE account_id = ${owner.accountId} AND name = ${name}`
              if (taken.length > 0) return yield* new ImageExists({ name })
              const rows = yield* sql`
                INSERT INTO images (id, account_id, name, reference, status, credentials_sealed, pulled_by, locked_until, created_at)
                VALUES (${id}, ${owner.accountId}, ${name}, ${parsed.normalized}, 'pulling', ${sealed}, ${nodeId},
                  ${new Date(at.getTime() + LEASE_MS)}, ${at})
                RETURNING ${sql.literal(COLUMNS)}`.pipe(decodeRows)
              yield* audit.record(owner, {
                action: "image.created",
                targetType: "image",
                targetId: id,
                details: { name, reference: parsed.normalized, private: input.credentials !== undefined }
              })
              return toInfo(rows[0]!)
            })
          )
          .pipe(Sql.orDefect)
        yield* FiberMap.run(pulls, id, pullOne(id, parsed))
        return info
      })

      const list = (owner: Owner, page: { readonly cursor: string | undefined; readonly limit: number }) =>
        newestFirst(
          sql,
          page,
          ({ after, orderAndLimit }) =>
            sql`SELECT ${sql.literal(COLUMNS)} FROM images
              WHERE ${sql.and([sql`account_id = ${owner.accountId}`, ...after])} ${orderAndLimit}`.pipe(
              decodeRows
            ),
          (id) => ID.test(id)
        ).pipe(
          Sql.orDefect,
          Effect.map((found) => ({ data: found.rows.map(toInfo), nextCursor: found.nextCursor }))
        )

      const findRow = (accountId: string, id: string) =>
        (ID.test(id)
          ? sql`SELECT ${sql.literal(COLUMNS)} FROM images WHERE account_id = ${accountId} AND id = ${id}`.pipe(
              decodeRows
            )
          : Effect.succeed([] as ReadonlyArray<Row>)
        ).pipe(
          Sql.orDefect,
          Effect.flatMap((rows) =>
            rows[0] === undefined ? Effect.fail(new ImageNotFound()) : Effect.succeed(rows[0])
          )
        )

      const get = (owner: Owner, id: string) => Effect.map(findRow(owner.accountId, id), toInfo)

      const remove = Effect.fn("AccountImages.remove")(function* (owner: Owner, id: string) {
        if (!ID.test(id)) return yield* new ImageNotFound()
        yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const rows = yield* sql<{ readonly name: string; readonly reference: string }>`
                DELETE FROM images WHERE account_id = ${owner.accountId} AND id = ${id} RETURNING name, reference`
              const deleted = Option.fromNullishOr(rows[0])
              if (Option.isNone(deleted)) return yield* new ImageNotFound()
              yield* audit.record(owner, {
                action: "image.deleted",
                targetType: "image",
                targetId: id,
                details: { name: deleted.value.name, reference: deleted.value.reference }
              })
            })
          )
          .pipe(Sql.orDefect)
        // A pull of it here stops; one on another node finds the row gone at its end and drops its archive.
        yield* FiberMap.remove(pulls, id)
        yield* blobs.remove(blobKeyOf(id))
        // This node's copy goes; a sandbox running it keeps its unpacked tree.
        yield* Effect.promise(() => Fs.rm(Path.join(cacheDir, id), { recursive: true, force: true }))
      })

      const find = (accountId: string, name: string) =>
        sql<{ readonly id: string; readonly status: "pulling" | "ready" | "failed" }>`
          SELECT id, status FROM images WHERE account_id = ${accountId} AND name = ${name}`.pipe(
          Sql.orDefect,
          Effect.map((rows) => Option.fromNullishOr(rows[0]))
        )

      /** The image's layout on this node: fetched from the blob store once, whole or not at all. */
      const local = (accountId: string, id: string) =>
        Effect.gen(function* () {
          const row = yield* findRow(accountId, id)
          if (row.status !== "ready") return yield* new ImageNotFound()
          const dir = Path.join(cacheDir, id)
          const present = yield* Effect.promise(() =>
            Fs.stat(Path.join(dir, "index.json")).then(
              () => true,
              () => false
            )
          )
          if (!present) {
            const spool = `${dir}.tmp-${Crypto.randomBytes(4).toString("hex")}`
            yield* Effect.acquireUseRelease(
              Effect.promise(() => Fs.mkdir(spool, { recursive: true, mode: 0o700 })),
              () =>
                Effect.gen(function* () {
                  yield* blobs.getFile(blobKeyOf(id), `${spool}.tar`)
                  yield* unpackArchive(`${spool}.tar`, spool).pipe(Effect.orDie)
                  yield* Effect.promise(() =>
                    Fs.rename(spool, dir).catch(async (error: NodeJS.ErrnoException) => {
                      // Another session fetched it meanwhile: theirs is the same.
                      if (error.code !== "ENOTEMPTY" && error.code !== "EEXIST") throw error
                    })
                  )
                }),
              () =>
                Effect.promise(async () => {
                  await Fs.rm(spool, { recursive: true, force: true })
                  await Fs.rm(`${spool}.tar`, { force: true })
                })
            )
          }
          return { dir, ref: "image" }
        })

      // A pull whose node stopped renewing its lease (it died, or stopped) ends `failed`: nobody finishes it.
      const sweep = Effect.gen(function* () {
        const at = yield* now
        const rows = yield* sql`
          UPDATE images SET status = 'failed', error_code = 'pull_interrupted',
            error_message = 'The node pulling it stopped before the pull ended: delete it and pull again.',
            credentials_sealed = NULL, pulled_by = NULL, locked_until = NULL
          WHERE status = 'pulling' AND locked_until < ${at} RETURNING id`.pipe(Sql.orDefect)
        return rows.length
      })
      yield* Housekeeping.every(
        {
          name: "images.interrupted",
          interval: "30 seconds",
          removed: (images) => ({ images }),
          level: "Debug"
        },
        sweep
      ).pipe(Effect.forkScoped)

      // This node's copies of images deleted through another node (or while this one was down) go too;
      // what a running sandbox unpacked from one is elsewhere (the image store's, by digest) and stays.
      const prune = Effect.gen(function* () {
        const names = yield* Effect.promise(() => Fs.readdir(cacheDir).catch(() => [] as Array<string>))
        const ids = names.filter((name) => ID.test(name))
        if (ids.length === 0) return 0
        const kept = yield* sql<{
          readonly id: string
        }>`SELECT id FROM images WHERE id IN ${sql.in(ids)}`.pipe(
          Sql.orDefect,
          Effect.map((rows) => new Set(rows.map((row) => row.id)))
        )
        const gone = ids.filter((id) => !kept.has(id))
        yield* Effect.forEach(gone, (id) =>
          Effect.promise(() => Fs.rm(Path.join(cacheDir, id), { recursive: true, force: true }))
        )
        return gone.length
      })
      yield* Housekeeping.every(
        { name: "images.copies", interval: "5 minutes", removed: (copies) => ({ copies }) },
        prune
      ).pipe(Effect.forkScoped)

      return AccountImages.of({ create, list, get, remove, find, local, prune })
    })
  )
}
