const BYTE_UNITS = ["B", "kB", "MB", "GB", "TB"]

export const bytes = (value: number) => {
  let unit = 0
  let scaled = value
  while (scaled >= 1000 && unit < BYTE_UNITS.length - 1) {
    scaled /= 1000
    unit++
  }
  return `${unit === 0 ? scaled : scaled.toFixed(scaled < 10 ? 2 : 1)} ${BYTE_UNITS[unit]}`
}

/** Micro-dollars as dollars: `$12.50`, with more digits for amounts below a cent. */
export const usd = (micro: number) => {
  const dollars = micro / 1_000_000
  const digits = dollars !== 0 && Math.abs(dollars) < 0.01 ? 6 : 2
  return `${dollars < 0 ? "−" : ""}$${Math.abs(dollars).toFixed(digits)}`
}

export const dateTime = (iso: string) =>
  new Date(iso).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" })

/** How long ago, in words: "12 s", "4 min", "3 h", "2 d". */
export const age = (iso: string, now = Date.now()) => {
  const seconds = Math.max(0, Math.round((now - Date.parse(iso)) / 1000))
  if (seconds < 60) return `${seconds} s`
  if (seconds < 3600) return `${Math.round(seconds / 60)} min`
  if (seconds < 86_400) return `${Math.round(seconds / 3600)} h`
  return `${Math.round(seconds / 86_400)} d`
}
