import { Schema } from "effect"

/** Bounds of a browser session's viewport, in CSS pixels. */
export const VIEWPORT_LIMITS = {
  cols: { minimum: 320, maximum: 3840 },
  rows: { minimum: 200, maximum: 2160 }
} as const

/** Bounds of a viewport's device scale factor (`window.devicePixelRatio`). */
export const SCALE_LIMITS = { minimum: 0.5, maximum: 4 } as const

/** A user agent: printable ASCII, no space at either end, at most 512 characters. */
export const UserAgent = Schema.String.check(
  Schema.isPattern(/^[\x21-\x7e](?:[\x20-\x7e]{0,510}[\x21-\x7e])?$/)
)

/** Whether `tag` is a BCP 47 language tag the JS engine knows (`de`, `de-DE`, `zh-Hant-TW`). */
export const isLocale = (tag: string) => {
  if (!/^[A-Za-z]{2,3}(?:-[A-Za-z0-9]{2,8}){0,3}$/.test(tag)) return false
  try {
    return Intl.getCanonicalLocales(tag).length === 1
  } catch {
    return false
  }
}

/** A locale's canonical form (`de-de` is `de-DE`). */
export const canonicalLocale = (tag: string) => Intl.getCanonicalLocales(tag)[0]!

/** Whether `zone` is an IANA time zone the JS engine knows (`Europe/Berlin`, `UTC`). */
export const isTimeZone = (zone: string) => {
  if (!/^[A-Za-z][A-Za-z0-9_+\-/]{0,63}$/.test(zone)) return false
  try {
    new Intl.DateTimeFormat("en", { timeZone: zone })
    return true
  } catch {
    return false
  }
}

/** `locale` at create: a BCP 47 language tag. */
export const Locale = Schema.String.check(
  Schema.makeFilter(isLocale, { expected: "a BCP 47 language tag, such as de-DE" })
)

/** `timezone` at create: an IANA time zone. */
export const TimeZone = Schema.String.check(
  Schema.makeFilter(isTimeZone, { expected: "an IANA time zone, such as Europe/Berlin" })
)

/** A time zone's canonical name (`europe/berlin` is `Europe/Berlin`). */
export const canonicalTimeZone = (zone: string) =>
  new Intl.DateTimeFormat("en", { timeZone: zone }).resolvedOptions().timeZone

export const Viewport = Schema.Struct({
  width: Schema.Int.check(Schema.isBetween(VIEWPORT_LIMITS.cols)).annotate({
    description: `The page's width in CSS pixels (${VIEWPORT_LIMITS.cols.minimum} to ${VIEWPORT_LIMITS.cols.maximum}).`
  }),
  height: Schema.Int.check(Schema.isBetween(VIEWPORT_LIMITS.rows)).annotate({
    description: `The page's height in CSS pixels (${VIEWPORT_LIMITS.rows.minimum} to ${VIEWPORT_LIMITS.rows.maximum}).`
  }),
  device_scale_factor: Schema.optionalKey(
    Schema.Number.check(Schema.isBetween(SCALE_LIMITS)).annotate({
      description: `\`window.devicePixelRatio\` (${SCALE_LIMITS.minimum} to ${SCALE_LIMITS.maximum}; default 1).`
    })
  ),
  mobile: Schema.optionalKey(
    Schema.Boolean.annotate({
      description:
        "A phone's page: the page's `<meta name=viewport>` is honoured, touch events are on and `(pointer: coarse)` matches (default false)."
    })
  )
})
export type Viewport = typeof Viewport.Type

/**
 * What a browser session's pages say of their browser, set at create: stored
 * with the session (its `identity` column), shown on it, and given to its browser.
 */
export const BrowserIdentity = Schema.Struct({
  user_agent: Schema.optionalKey(UserAgent),
  locale: Schema.optionalKey(Locale),
  timezone: Schema.optionalKey(TimeZone),
  viewport: Schema.optionalKey(Viewport)
})
export type BrowserIdentity = typeof BrowserIdentity.Type

/** The identity a create asks for, in canonical forms (`undefined`: none). */
export const fromCreate = (input: BrowserIdentity): BrowserIdentity | undefined => {
  const identity: BrowserIdentity = {
    ...(input.user_agent === undefined ? {} : { user_agent: input.user_agent }),
    ...(input.locale === undefined ? {} : { locale: canonicalLocale(input.locale) }),
    ...(input.timezone === undefined ? {} : { timezone: canonicalTimeZone(input.timezone) }),
    ...(input.viewport === undefined ? {} : { viewport: input.viewport })
  }
  return isEmpty(identity) ? undefined : identity
}

/** Whether the identity asks for more than a viewport's size, which a warm browser takes by a resize. */
export const needsOwnLaunch = (identity: BrowserIdentity) =>
  identity.user_agent !== undefined ||
  identity.locale !== undefined ||
  identity.timezone !== undefined ||
  (identity.viewport?.device_scale_factor ?? 1) !== 1 ||
  identity.viewport?.mobile === true

/** Whether any field is set. */
export const isEmpty = (identity: BrowserIdentity) =>
  identity.user_agent === undefined &&
  identity.locale === undefined &&
  identity.timezone === undefined &&
  identity.viewport === undefined
