import * as Util from "node:util"
import * as Zlib from "node:zlib"

// Off the event loop: an archive unpacks to up to its limit's bytes, and the service relays meanwhile.
const inflateRaw = Util.promisify(Zlib.inflateRaw)

/**
 * A zip archive's files, read whole from memory with its bounds checked
 * before anything is inflated: what an uploaded archive may hold (an
 * extension's). Only stored and deflated entries, no encryption, no zip64,
 * no links; names are relative paths without `..`, `.` or empty steps.
 */

export interface ZipLimits {
  /** Files at most. */
  readonly files: number
  /** Uncompressed bytes of all files together, at most. */
  readonly bytes: number
}

export interface ZipFile {
  /** Its path in the archive, `/`-separated. */
  readonly name: string
  readonly data: Uint8Array
}

/** Why an archive was refused, in words for the caller. */
export class ZipRefused extends Error {}

export const EOCD = 0x06054b50
export const CENTRAL = 0x02014b50
export const LOCAL = 0x04034b50

/** A path an archive may name: relative, `/`-separated, no `.` or `..` step, no control characters. */
const safeName = (name: string) =>
  name.length > 0 &&
  name.length <= 1024 &&
  !name.startsWith("/") &&
  !name.includes("\\") &&
  !/[\u0000-\u001f\u007f]/.test(name) &&
  name
    .split("/")
    .every((step, index, steps) => (step === "" ? index === steps.length - 1 : step !== "." && step !== ".."))

/** The files of the archive `bytes` (directories are implied by their files' names). */
export const read = async (bytes: Uint8Array, limits: ZipLimits): Promise<ReadonlyArray<ZipFile>> => {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  // The end record is in the last 22 + 65535 bytes (its comment is at most that long).
  let end = -1
  for (let at = buffer.length - 22; at >= Math.max(0, buffer.length - 22 - 65_535); at--) {
    if (buffer.readUInt32LE(at) === EOCD) {
      end = at
      break
    }
  }
  if (end < 0) throw new ZipRefused("it is not a zip archive")
  const entries = buffer.readUInt16LE(end + 10)
  const size = buffer.readUInt32LE(end + 12)
  const offset = buffer.readUInt32LE(end + 16)
  if (entries === 0xffff || size === 0xffffffff || offset === 0xffffffff)
    throw new ZipRefused("zip64 archives are not supported")
  if (buffer.readUInt16LE(end + 4) !== 0 || buffer.readUInt16LE(end + 6) !== 0)
    throw new ZipRefused("multi-part archives are not supported")
  if (offset + size > end) throw new ZipRefused("its central directory is out of bounds")
  if (entries > limits.files) throw new ZipRefused(`it holds more than ${limits.files} entries`)

  const files: Array<ZipFile> = []
  const names = new Set<string>()
  let total = 0
  let at = offset
  for (let index = 0; index < entries; index++) {
    if (at + 46 > end || buffer.readUInt32LE(at) !== CENTRAL)
      throw new ZipRefused("its central directory is damaged")
    const flags = buffer.readUInt16LE(at + 8)
    const method = buffer.readUInt16LE(at + 10)
    const compressed = buffer.readUInt32LE(at + 20)
    const uncompressed = buffer.readUInt32LE(at + 24)
    const nameLength = buffer.readUInt16LE(at + 28)
    const extraLength = buffer.readUInt16LE(at + 30)
    const commentLength = buffer.readUInt16LE(at + 32)
    const madeBy = buffer.readUInt16LE(at + 4) >> 8
    const mode = buffer.readUInt32LE(at + 38) >>> 16
    const local = buffer.readUInt32LE(at + 42)
    if (at + 46 + nameLength + extraLength + commentLength > end)
      throw new ZipRefused("its central directory is damaged")
    const name = buffer.toString("utf8", at + 46, at + 46 + nameLength)
    at += 46 + nameLength + extraLength + commentLength
    if (!safeName(name))
      throw new ZipRefused(`it names a path outside the extension (${JSON.stringify(name)})`)
    if ((flags & 0x1) !== 0) throw new ZipRefused(`${name} is encrypted`)
    // Unix archivers keep the file type in the high bits: a link would point anywhere.
    if (madeBy === 3 && (mode & 0o170000) === 0o120000) throw new ZipRefused(`${name} is a symbolic link`)
    if (name.endsWith("/")) continue
    if (names.has(name)) throw new ZipRefused(`it holds ${name} twice`)
    names.add(name)
    if (method !== 0 && method !== 8)
      throw new ZipRefused(`${name} is compressed with a method other than deflate`)
    total += uncompressed
    if (total > limits.bytes) throw new ZipRefused(`its files unpack to more than ${limits.bytes} bytes`)
    if (local + 30 > buffer.length || buffer.readUInt32LE(local) !== LOCAL)
      throw new ZipRefused(`${name}'s header is damaged`)
    const start = local + 30 + buffer.readUInt16LE(local + 26) + buffer.readUInt16LE(local + 28)
    if (start + compressed > buffer.length) throw new ZipRefused(`${name} is cut short`)
    const raw = buffer.subarray(start, start + compressed)
    let data: Uint8Array
    if (method === 0) data = raw
    else {
      try {
        // Never more than it says it holds: a bomb stops at its declared size.
        data = await inflateRaw(raw, { maxOutputLength: Math.max(1, uncompressed) })
      } catch {
        throw new ZipRefused(`${name} cannot be inflated`)
      }
    }
    if (data.length !== uncompressed) throw new ZipRefused(`${name} is not the size its header says`)
    files.push({ name, data })
  }
  // A file where another's folder would be ("a" and "a/b") cannot be unpacked.
  for (const name of names) {
    const steps = name.split("/")
    for (let depth = 1; depth < steps.length; depth++) {
      const folder = steps.slice(0, depth).join("/")
      if (names.has(folder)) throw new ZipRefused(`${folder} is both a file and a folder`)
    }
  }
  return files
}
