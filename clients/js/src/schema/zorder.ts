// Z-order by the `index` string (docs/document-schema.md): shapes sort by plain string comparison, ties by id.
// New keys are made with a base-62 fractional midpoint; keys written by others (the server's
// fractional_index, a model) may use other characters, so every generator checks its result and
// falls back to a key that is still correctly ordered.

const DIGITS = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'

/** Orders two shapes back-to-front: by `index`, then by `id` so every peer agrees on ties. */
export function compareZ (a: { index: string, id: string }, b: { index: string, id: string }): number {
  if (a.index !== b.index) return a.index < b.index ? -1 : 1
  if (a.id !== b.id) return a.id < b.id ? -1 : 1
  return 0
}

function inAlphabet (s: string): boolean {
  for (const ch of s) if (!DIGITS.includes(ch)) return false
  return !s.endsWith('0')
}

/** Midpoint of two base-62 fractions `a < b` (`b = null`: one); neither may end in '0'. */
function midpoint (a: string, b: string | null): string {
  if (b !== null) {
    let n = 0
    while (n < b.length && (a[n] ?? '0') === b[n]) n++
    if (n > 0) return b.slice(0, n) + midpoint(a.slice(n), b.slice(n))
  }
  const da = a.length > 0 ? DIGITS.indexOf(a.charAt(0)) : 0
  const db = b !== null && b.length > 0 ? DIGITS.indexOf(b.charAt(0)) : DIGITS.length
  if (db - da > 1) return DIGITS.charAt(Math.round((da + db) / 2))
  if (b !== null && b.length > 1) return b.slice(0, 1)
  return DIGITS.charAt(da) + midpoint(a.slice(1), null)
}

/**
 * A key strictly between `lo` and `hi` (either may be `null`: unbounded). Returns `null` only
 * when no key exists (`hi` is the empty string or `lo >= hi`): callers then keep the old order.
 */
export function keyBetween (lo: string | null, hi: string | null): string | null {
  const a = lo ?? ''
  if (hi !== null && a >= hi) return null
  if (inAlphabet(a) && (hi === null || inAlphabet(hi))) {
    const k = midpoint(a, hi)
    if (k > a && (hi === null || k < hi)) return k
  }
  // Foreign keys: extend `lo` (any extension sorts above it) while staying below `hi`.
  if (hi === null) return a + 'V'
  for (const suffix of ['V', '1', '01']) {
    const k = a + suffix
    if (k > a && k < hi) return k
  }
  // `hi` extends `lo` with only tiny characters: go below `hi` by lowering its first character
  // above `lo`'s length, if that still sorts above `lo`.
  for (let i = hi.length - 1; i >= 0; i--) {
    const code = hi.charCodeAt(i)
    if (code > 0x21) {
      const k = hi.slice(0, i) + String.fromCharCode(code - 1) + 'V'
      if (k > a && k < hi) return k
    }
  }
  return null
}

/** A key above every index in `indexes` (for new shapes and "bring to front"). */
export function keyAbove (indexes: Iterable<string>): string {
  let max: string | null = null
  for (const i of indexes) if (max === null || i > max) max = i
  return keyBetween(max, null) ?? 'V'
}

/** A key below every index in `indexes` (for "send to back"), or `null` if none exists. */
export function keyBelow (indexes: Iterable<string>): string | null {
  let min: string | null = null
  for (const i of indexes) if (min === null || i < min) min = i
  return min === null ? 'V' : keyBetween(null, min)
}
