// tldraw's colour names and fills (docs/document-schema.md), mapped to the light-theme values tldraw draws with.

/** The colour names of schema v1, in the order the style panel shows them. */
export const COLOR_NAMES = [
  'black', 'grey', 'light-violet', 'violet', 'blue', 'light-blue', 'yellow',
  'orange', 'green', 'light-green', 'light-red', 'red', 'white'
] as const
export type ColorName = typeof COLOR_NAMES[number]

/** The fill names of schema v1. */
export const FILL_NAMES = ['none', 'semi', 'solid', 'pattern'] as const
export type FillName = typeof FILL_NAMES[number]

/** One colour's swatches: stroke, light tint, hatch, and sticky-note paper. */
export interface Swatch { solid: string, semi: string, pattern: string, note: string }

const PALETTE: Record<ColorName, Swatch> = {
  black: { solid: '#1d1d1d', semi: '#e8e8e8', pattern: '#494949', note: '#fce19c' },
  grey: { solid: '#9fa8b2', semi: '#eceef0', pattern: '#bcc3c9', note: '#c0cad3' },
  'light-violet': { solid: '#e085f4', semi: '#f5eafa', pattern: '#e9acf8', note: '#dfb0f9' },
  violet: { solid: '#ae3ec9', semi: '#ecdcf2', pattern: '#bd63d3', note: '#db91fd' },
  blue: { solid: '#4465e9', semi: '#dce1f8', pattern: '#6681ee', note: '#8aa3ff' },
  'light-blue': { solid: '#4ba1f1', semi: '#ddedfa', pattern: '#6fbbf8', note: '#9bc4fd' },
  yellow: { solid: '#f1ac4b', semi: '#f9f0e6', pattern: '#fecb92', note: '#fed49a' },
  orange: { solid: '#e16919', semi: '#f8e2d4', pattern: '#f78438', note: '#faa475' },
  green: { solid: '#099268', semi: '#d3e9e3', pattern: '#39a785', note: '#6fc896' },
  'light-green': { solid: '#4cb05e', semi: '#dbf0e0', pattern: '#65cb78', note: '#98d08a' },
  'light-red': { solid: '#f87777', semi: '#f4dadb', pattern: '#fe9e9e', note: '#f7a5a1' },
  red: { solid: '#e03131', semi: '#f4dadb', pattern: '#e83d3d', note: '#fc8282' },
  white: { solid: '#ffffff', semi: '#f5f5f5', pattern: '#f9f9f9', note: '#ffffff' }
}

/** Whether `name` is one of schema v1's colour names. */
export function isColorName (name: unknown): name is ColorName {
  return typeof name === 'string' && Object.prototype.hasOwnProperty.call(PALETTE, name)
}

/** Whether `name` is one of schema v1's fill names. */
export function isFillName (name: unknown): name is FillName {
  return typeof name === 'string' && (FILL_NAMES as readonly string[]).includes(name)
}

/** The swatch of a colour; unknown names (a newer client, a confused model) draw black. */
export function swatch (name: unknown): Swatch {
  return PALETTE[isColorName(name) ? name : 'black']
}

/** The SVG `fill` attribute for a fill style; `pattern` refers to a `<pattern>` per colour. */
export function fillPaint (color: unknown, fill: unknown): { paint: string, opacity: number } {
  const c = isColorName(color) ? color : 'black'
  switch (isFillName(fill) ? fill : 'none') {
    case 'semi': return { paint: PALETTE[c].semi, opacity: 0.6 }
    case 'solid': return { paint: PALETTE[c].semi, opacity: 1 }
    case 'pattern': return { paint: `url(#pattern-${c})`, opacity: 1 }
    default: return { paint: 'none', opacity: 1 }
  }
}

/** Peer colours (cursors, selections) for people who have none yet: stable per id. */
export const PEER_COLORS = ['#e03131', '#4465e9', '#099268', '#e16919', '#ae3ec9', '#4ba1f1', '#f1ac4b', '#4cb05e']

/** A stable colour for a user id (FNV-1a hash), so one person keeps one colour across reloads. */
export function colorForId (id: string): string {
  let h = 0x811c9dc5
  for (let i = 0; i < id.length; i++) {
    h ^= id.charCodeAt(i)
    h = Math.imul(h, 0x01000193) >>> 0
  }
  return PEER_COLORS[h % PEER_COLORS.length] ?? '#4465e9'
}
