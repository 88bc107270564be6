// The document keys this binding adds to the schema's shapes and pages (docs/document-schema.md
// "tldraw binding"), and the conversions that need no editor: z-order keys both ways, tldraw's
// rich text to the schema's plain `text` and back. Fairies and the SVG demo ignore these keys.
import { toRichText, type IndexKey, type TLRichText } from 'tldraw'

/** Prefix of the keys holding what only tldraw knows: `tl:dash`, `tl:size`, `tl:opacity`, … (JSON values). */
export const TL_PREFIX = 'tl:'
/** A rich text the plain `text` cannot hold (TipTap JSON), kept beside `text`. */
export const TL_RICH_TEXT = 'tl:richText'
/** A pen stroke's tldraw segments (pressure, several segments), kept beside `points`. */
export const TL_SEGMENTS = 'tl:segments'
/** A line's tldraw points (more than two, or their ids), kept beside `x1, y1, x2, y2`. */
export const TL_LINE_POINTS = 'tl:points'
/** The record's `opacity`, `meta`. */
export const TL_OPACITY = 'tl:opacity'
export const TL_META = 'tl:meta'

/** The key of a tldraw-only property `prop` (`tl:` + its name). */
export function tlKey (prop: string): string {
  return `${TL_PREFIX}${prop}`
}

const DIGITS = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'

/**
 * Whether a z-order key is one tldraw accepts as it is (fractional-indexing's rule: a head
 * letter giving the integer part's length, base-62 digits, no fraction ending in `0`).
 */
export function isTldrawIndex (key: string): boolean {
  const head = key.charCodeAt(0)
  let len: number
  if (head >= 97 && head <= 122) len = head - 97 + 2
  else if (head >= 65 && head <= 90) len = 90 - head + 2
  else return false
  if (key.length < len) return false
  for (const ch of key.slice(1)) if (!DIGITS.includes(ch)) return false
  if (key === `A${'0'.repeat(26)}`) return false
  return !(key.length > len && key.endsWith('0'))
}

/**
 * The tldraw index for a document `index`: itself when tldraw accepts it, else an order-keeping
 * encoding under `a0` (each UTF-16 unit as three base-62 digits starting at `1`, then `01`), so
 * keys others wrote (the server's hex keys, the demo's) sort among themselves as they do by
 * plain string comparison, below tldraw's own keys, as they do in the document.
 */
export function toTldrawIndex (index: string): IndexKey {
  if (index !== '' && isTldrawIndex(index)) return index as IndexKey
  let out = 'a0'
  for (let i = 0; i < index.length; i++) {
    let n = index.charCodeAt(i) + 3844
    const d: string[] = []
    for (let k = 0; k < 3; k++) { d.unshift(DIGITS[n % 62] ?? '0'); n = Math.floor(n / 62) }
    out += d.join('')
  }
  return `${out}01` as IndexKey
}

/** The document `index` for a tldraw index: an encoded key decoded, any other tldraw key as it is. */
export function fromTldrawIndex (index: string): string {
  if (!index.startsWith('a0') || !index.endsWith('01')) return index
  const body = index.slice(2, -2)
  if (body.length % 3 !== 0) return index
  let out = ''
  for (let i = 0; i < body.length; i += 3) {
    let n = 0
    for (const ch of body.slice(i, i + 3)) {
      const v = DIGITS.indexOf(ch)
      if (v < 0) return index
      n = n * 62 + v
    }
    if (n < 3844 || n - 3844 > 0xffff) return index
    out += String.fromCharCode(n - 3844)
  }
  return out
}

interface RichNode { type?: string, text?: string, content?: RichNode[] }

/** The plain text of a rich text: paragraphs (and hard breaks) joined by new lines. */
export function plainText (rich: TLRichText | null | undefined): string {
  if (rich == null) return ''
  const blocks: string[] = []
  const inline = (n: RichNode): string => {
    if (n.type === 'text') return n.text ?? ''
    if (n.type === 'hardBreak') return '\n'
    return (n.content ?? []).map(inline).join('')
  }
  const walk = (n: RichNode): void => {
    const kids = n.content ?? []
    if (kids.length > 0 && kids.every(k => k.type === 'text' || k.type === 'hardBreak')) { blocks.push(inline(n)); return }
    if (n.type === 'paragraph' || n.type === 'heading') { blocks.push(inline(n)); return }
    for (const k of kids) walk(k)
  }
  walk(rich as unknown as RichNode)
  return blocks.join('\n')
}

/** Whether `toRichText(plainText(rich))` gives `rich` back: then `text` alone holds it. */
export function plainHolds (rich: TLRichText): boolean {
  return JSON.stringify(toRichText(plainText(rich))) === JSON.stringify(rich)
}

/** Most plain texts whose rich text {@link plainRich} keeps (then it starts again). */
const PLAIN_RICH_MAX = 4096
const plainRichCache = new Map<string, TLRichText>()

/**
 * The rich text of a plain `text`, one object per text: tldraw caches a label's HTML by the
 * rich text object (its `renderHtmlFromRichText`, where TipTap builds a schema for each call), so
 * shapes with the same words share one rendering. tldraw never changes a record's props in place.
 */
export function plainRich (text: string): TLRichText {
  let r = plainRichCache.get(text)
  if (r === undefined) {
    if (plainRichCache.size >= PLAIN_RICH_MAX) plainRichCache.clear()
    r = toRichText(text)
    plainRichCache.set(text, r)
  }
  return r
}

/** The rich text for a document's `text`, using the kept rich text when it still says the same. */
export function richFrom (text: string, kept: unknown): TLRichText {
  if (typeof kept === 'object' && kept !== null && plainText(kept as TLRichText) === text) return kept as TLRichText
  return plainRich(text)
}
