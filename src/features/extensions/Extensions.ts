import { Clock, Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { Audit } from "../audit/Audit.ts"
import {
  EXTENSION_LIMITS,
  type ExtensionInfo,
  ExtensionNotFound,
  InvalidExtension,
  REFUSED_PERMISSIONS
} from "../../kernel/Extension.ts"
import type { Owner } from "../../kernel/Owner.ts"
import { BlobStore } from "../../platform/blobs/BlobStore.ts"
import { NodeConfig } from "../../platform/config/Config.ts"
import * as Sql from "../../platform/db/Sql.ts"
import * as Zip from "../../platform/files/Zip.ts"

const Row = Schema.Struct({
  id: Schema.String,
  account_id: Schema.String,
  name: Schema.String,
  version: Schema.String,
  manifest_version: Schema.Number,
  files: Schema.Number,
  bytes: Schema.BigInt,
  sha256: Schema.String,
  created_at: Schema.Date
})
type Row = typeof Row.Type

const decodeRows = Effect.flatMap(Schema.decodeUnknownEffect(Schema.Array(Row)))

const toInfo = (row: Row): ExtensionInfo => ({
  id: row.id,
  object: "extension",
  name: row.name,
  version: row.version,
  manifest_version: row.manifest_version,
  files: row.files,
  bytes: Number(row.bytes),
  sha256: row.sha256,
  created_at: row.created_at
})

/** The blob an extension's zip is kept in: its own, so removing it never touches another's. */
const blobKeyOf = (id: string) => `extensions/${id}.zip`

const ID = /^ext_[0-9a-f]{32}$/

/** What a valid upload holds: its files (a lone top folder taken off) and its manifest's fields. */
export interface Unpacked {
  readonly files: ReadonlyArray<Zip.ZipFile>
  readonly name: string
  readonly version: string
  readonly bytes: number
}

const refuse = (reason: string) => new InvalidExtension({ reason })

/**
 * The extension `zip` holds, checked: a zip within `EXTENSION_LIMITS` whose
 * `manifest.json` (at its root, or in its one top folder) is a Manifest V3
 * manifest with a name and a version, asking for no permission in
 * `REFUSED_PERMISSIONS`.
 */
export const unpack = async (zip: Uint8Array): Promise<Unpacked> => {
  let files: ReadonlyArray<Zip.ZipFile>
  try {
    files = await Zip.read(zip, { files: EXTENSION_LIMITS.files, bytes: EXTENSION_LIMITS.unpackedBytes })
  } catch (error) {
    if (error instanceof Zip.ZipRefused) throw refuse(error.message)
    throw error
  }
  // A folder zipped whole: its one top folder is the extension.
  const tops = new Set(files.map((file) => file.name.split("/")[0]))
  if (!files.some((file) => file.name === "manifest.json") && tops.size === 1) {
    const top = `${[...tops][0]}/`
    if (files.every((file) => file.name.startsWith(top)))
      files = files.map((file) => ({ name: file.name.slice(top.length), data: file.data }))
  }
  const manifestFile = files.find((file) => file.name === "manifest.json")
  if (manifestFile === undefined) throw refuse("it has no manifest.json at its root")
  let manifest: Record<string, unknown>
  try {
    manifest = JSON.parse(
      Buffer.from(manifestFile.data)
        .toString("utf8")
        .replace(/^\uFEFF/, "")
    )
  } catch {
    throw refuse("its manifest.json is not JSON")
  }
  if (typeof manifest !== "object" || manifest === null || Array.isArray(manifest))
    throw refuse("its manifest.json is not an object")
  if (manifest.manifest_version !== 3)
    throw refuse("its manifest_version is not 3 (Chromium loads Manifest V3 extensions only)")
  const { name, version } = manifest
  if (typeof name !== "string" || name.trim() === "" || name.length > 200)
    throw refuse("its manifest has no name (1 to 200 characters)")
  if (typeof version !== "string" || !/^\d{1,9}(\.\d{1,9}){0,3}$/.test(version))
    throw refuse("its manifest's version is not 1 to 4 dot-separated numbers")
  const asked = [
    ...(Array.isArray(manifest.permissions) ? manifest.permissions : []),
    ...(Array.isArray(manifest.optional_permissions) ? manifest.optional_permissions : [])
  ]
  for (const permission of asked)
    if (typeof permission === "string" && REFUSED_PERMISSIONS[permission] !== undefined)
      throw refuse(
        `it asks for the ${permission} permission, which sessions do not give: ${REFUSED_PERMISSIONS[permission]}`
      )
  return {
    files,
    name: name.trim(),
    version,
    bytes: files.reduce((sum, file) => sum + file.data.length, 0)
  }
}

/** The extensions of an account: uploaded zips, checked and kept in the blob store. */
export class Extensions extends Context.Service<
  Extensions,
  {
    readonly create: (owner: Owner, zip: Uint8Array) => Effect.Effect<ExtensionInfo, InvalidExtension>
    readonly list: (owner: Owner) => Effect.Effect<ReadonlyArray<ExtensionInfo>>
    readonly get: (owner: Owner, id: string) => Effect.Effect<ExtensionInfo, ExtensionNotFound>
    readonly remove: (owner: Owner, id: string) => Effect.Effect<void, ExtensionNotFound>
    /** Those of `ids` the account has (each once). */
    readonly owned: (accountId: string, ids: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<string>>
    /**
     * Each of `ids` unpacked on this node, read-only, in the order given: a
     * dir of `DATA_DIR/extensions` named by its zip's hash, made once from
     * the blob store and kept for the next session that loads it.
     */
    readonly unpacked: (
      accountId: string,
      ids: ReadonlyArray<string>
    ) => Effect.Effect<ReadonlyArray<string>, ExtensionNotFound>
  }
>()("rbs/extensions/Extensions") {
  static readonly layer = Layer.effect(
    Extensions,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const audit = yield* Audit
      const blobs = yield* BlobStore
      const { dataDir } = yield* NodeConfig
      const unpackedDir = Path.join(dataDir, "extensions")

      const create = Effect.fn("Extensions.create")(function* (owner: Owner, zip: Uint8Array) {
        const checked = yield* Effect.tryPromise({
          try: () => unpack(zip),
          catch: (error) => (error instanceof InvalidExtension ? error : refuse("it cannot be read"))
        })
        const sha256 = Crypto.createHash("sha256").update(zip).digest("hex")
        const id = `ext_${Crypto.randomUUID().replaceAll("-", "")}`
        // The blob first: a row never names a zip that is not kept.
        const spooled = Path.join(dataDir, "tmp", `extension-${Crypto.randomUUID()}.zip`)
        yield* Effect.promise(async () => {
          await Fs.mkdir(Path.dirname(spooled), { recursive: true })
          await Fs.writeFile(spooled, zip, { mode: 0o600 })
        })
        yield* blobs
          .putFile(blobKeyOf(id), spooled)
          .pipe(Effect.ensuring(Effect.promise(() => Fs.rm(spooled, { force: true }))))
        const at = new Date(yield* Clock.currentTimeMillis)
        return yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const rows = yield* sql`
                INSERT INTO extensions (id, account_id, name, version, manifest_version, files, bytes, sha256, created_at)
                VALUES (${id}, ${owner.accountId}, ${checked.name}, ${checked.version}, 3, ${checked.files.length},
                  ${checked.bytes}, ${sha256}, ${at})
                RETURNING *`.pipe(decodeRows)
              yield* audit.record(owner, {
                action: "extension.created",
                targetType: "extension",
                targetId: id,
                details: { name: checked.name, version: checked.version, sha256 }
              })
              return toInfo(rows[0]!)
            })
          )
          .pipe(Sql.orDefect)
      })

      const list = (owner: Owner) =>
        sql`SELECT * FROM extensions WHERE account_id = ${owner.accountId} ORDER BY created_at DESC, id DESC`.pipe(
          decodeRows,
          Effect.map((rows) => rows.map(toInfo)),
          Sql.orDefect
        )

      const find = (accountId: string, id: string) =>
        (ID.test(id)
          ? sql`SELECT * FROM extensions WHERE account_id = ${accountId} AND id = ${id}`.pipe(decodeRows)
          : Effect.succeed([] as ReadonlyArray<Row>)
        ).pipe(
          Sql.orDefect,
          Effect.flatMap((rows) =>
            rows[0] === undefined ? Effect.fail(new ExtensionNotFound()) : Effect.succeed(rows[0])
          )
        )

      const get = (owner: Owner, id: string) => Effect.map(find(owner.accountId, id), toInfo)

      const remove = Effect.fn("Extensions.remove")(function* (owner: Owner, id: string) {
        if (!ID.test(id)) return yield* new ExtensionNotFound()
        yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const rows = yield* sql<{ readonly sha256: string }>`
                DELETE FROM extensions WHERE account_id = ${owner.accountId} AND id = ${id} RETURNING sha256`
              const deleted = Option.fromNullishOr(rows[0])
              if (Option.isNone(deleted)) return yield* new ExtensionNotFound()
              yield* audit.record(owner, {
                action: "extension.deleted",
                targetType: "extension",
                targetId: id,
                details: { sha256: deleted.value.sha256 }
              })
            })
          )
          .pipe(Sql.orDefect)
        // Its zip goes with it (a node that unpacked it keeps its copy for the sessions running it).
        yield* blobs.remove(blobKeyOf(id))
      })

      const owned = (accountId: string, ids: ReadonlyArray<string>) =>
        Effect.gen(function* () {
          const valid = ids.filter((id) => ID.test(id))
          if (valid.length === 0) return []
          const rows = yield* sql<{ readonly id: string }>`
            SELECT id FROM extensions WHERE account_id = ${accountId} AND id IN ${sql.in(valid)}`.pipe(
            Sql.orDefect
          )
          return rows.map((row) => row.id)
        })

      /** The extension `row` unpacked here, by its zip's hash: made once, whole or not at all. */
      const unpackedAt = ({ id, sha256 }: Row) =>
        Effect.promise(async () => {
          const dir = Path.join(unpackedDir, sha256)
          if (
            await Fs.stat(dir).then(
              () => true,
              () => false
            )
          )
            return dir
          return undefined
        }).pipe(
          Effect.flatMap((found) =>
            found !== undefined
              ? Effect.succeed(found)
              : Effect.gen(function* () {
                  const dir = Path.join(unpackedDir, sha256)
                  const spooled = Path.join(unpackedDir, `.${sha256}-${Crypto.randomUUID()}`)
                  yield* Effect.promise(() => Fs.mkdir(unpackedDir, { recursive: true, mode: 0o755 }))
                  yield* blobs.getFile(blobKeyOf(id), `${spooled}.zip`)
                  yield* Effect.promise(async () => {
                    try {
                      const { files } = await unpack(await Fs.readFile(`${spooled}.zip`))
                      // Readable by every browser's user, written by none of them.
                      await Fs.mkdir(spooled, { mode: 0o755 })
                      for (const file of files) {
                        const target = Path.join(spooled, file.name)
                        await Fs.mkdir(Path.dirname(target), { recursive: true, mode: 0o755 })
                        await Fs.writeFile(target, file.data, { mode: 0o644 })
                      }
                      await Fs.rename(spooled, dir).catch(async (error: NodeJS.ErrnoException) => {
                        // Another session unpacked it meanwhile: theirs is the same.
                        if (error.code !== "ENOTEMPTY" && error.code !== "EEXIST") throw error
                        await Fs.rm(spooled, { recursive: true, force: true })
                      })
                    } finally {
                      await Fs.rm(`${spooled}.zip`, { force: true })
                    }
                  })
                  return dir
                })
          )
        )

      const unpacked = (accountId: string, ids: ReadonlyArray<string>) =>
        Effect.forEach(ids, (id) => Effect.flatMap(find(accountId, id), unpackedAt))

      return Extensions.of({ create, list, get, remove, owned, unpacked })
    })
  )
}
