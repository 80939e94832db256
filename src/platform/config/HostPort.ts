/** A `host:port` address. */
export interface HostPort {
  readonly host: string
  readonly port: number
}

/** `host:port` or `[v6]:port`; `undefined` when it is neither. */
export const parseHostPort = (text: string): HostPort | undefined => {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s]+)):(\d{1,5})$/.exec(text.trim())
  if (match === null) return undefined
  const port = Number(match[3])
  if (port < 1 || port > 65535) return undefined
  return { host: match[1] ?? match[2]!, port }
}

/** `parseHostPort`, or an error naming the variable. */
export const hostPort = (name: string, text: string): HostPort => {
  const parsed = parseHostPort(text)
  if (parsed === undefined) throw new Error(`${name} must be host:port (or [v6]:port), got "${text}"`)
  return parsed
}
