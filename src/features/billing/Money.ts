/** Money is integer micro-USD: 1,000,000 = 1 USD. */
export const MICRO_USD_PER_USD = 1_000_000n

/** The egress price: 5 USD per 10^9 bytes, so one micro-dollar buys 200 bytes. */
export const BYTES_PER_MICRO_USD = 200n

export const usdToMicro = (usd: number): bigint => BigInt(usd) * MICRO_USD_PER_USD

/** `12.345678` from micro-USD, exactly (no floating point). */
export const formatUsd = (micro: bigint): string => {
  const sign = micro < 0n ? "-" : ""
  const abs = micro < 0n ? -micro : micro
  const whole = abs / MICRO_USD_PER_USD
  const fraction = (abs % MICRO_USD_PER_USD).toString().padStart(6, "0")
  return `${sign}${whole}.${fraction}`
}

/**
 * The charge for a session's egress, with the account's carried bytes: whole
 * micro-dollars are charged, the remainder (under 200 bytes) carries over to
 * the next session, so no byte is lost and none is charged twice.
 */
export const chargeEgress = (bytes: bigint, carriedBytes: bigint) => {
  const total = bytes + carriedBytes
  return { charge: total / BYTES_PER_MICRO_USD, carry: total % BYTES_PER_MICRO_USD }
}
