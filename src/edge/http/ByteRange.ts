import type { ByteRange } from "../../platform/blobs/BlobStore.ts"

/**
 * An HTTP `Range` header against a body of `size` bytes (RFC 9110, one range):
 * `undefined` for the whole body (no header, or one this parser does not
 * serve, such as several ranges), `"unsatisfiable"` for a range past the end.
 */
export const parseRange = (
  header: string | undefined,
  size: number
): ByteRange | "unsatisfiable" | undefined => {
  const match = /^bytes=(\d*)-(\d*)$/.exec(header?.trim() ?? "")
  if (match === null) return undefined
  const [, first, last] = match
  if (first === "" && last === "") return undefined
  if (first === "") {
    // The last N bytes.
    const suffix = Number(last)
    if (suffix === 0) return "unsatisfiable"
    return { start: Math.max(0, size - suffix), end: size - 1 }
  }
  const start = Number(first)
  const end = last === "" ? size - 1 : Math.min(Number(last), size - 1)
  if (start >= size || start > end) return "unsatisfiable"
  return { start, end }
}
