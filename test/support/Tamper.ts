/**
 * A signed token (base64url, its signature last) with one character of the
 * signature changed, so that it never equals the token: the character five
 * from the end, whose six bits are all data (the last character may carry
 * padding bits a decoder ignores). Replacing the last two with `AA` left a
 * signature that already ended so unchanged, one time in 4096.
 */
export const tamper = (signed: string) => {
  const at = signed.length - 5
  return signed.slice(0, at) + (signed[at] === "A" ? "B" : "A") + signed.slice(at + 1)
}
