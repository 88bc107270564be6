// The names schema v2 allows (docs/document-schema.md; the server's src/canvas/schema.rs): the
// root maps, shape types by family, tldraw's colours and fills, text alignments, and the
// normalisations the server applies (`gray` → `grey`, `left` → `start`). Pure data and pure
// functions; reading and writing shapes is `shapes.ts` / `write.ts`.
import { COLOR_NAMES, FILL_NAMES, type ColorName, type FillName } from './palette.js'

/** The document's root maps. */
export const ROOTS = ['shapes', 'pages', 'fairies', 'projects', 'tasks', 'suggestions', 'meta'] as const
export type RootName = typeof ROOTS[number]
/** Roots only the server writes: a peer's update under one closes its socket with 1008. */
export const SERVER_ROOTS: readonly RootName[] = ['fairies', 'projects', 'tasks', 'suggestions', 'meta']
/** The schema version the server writes in `meta.schemaVersion`. */
export const SCHEMA_VERSION = 2

/** Geo kinds: each is a shape `type` of its own, drawn from `w`/`h`. */
export const GEO_KINDS = [
  'rectangle', 'ellipse', 'triangle', 'diamond', 'hexagon', 'pentagon', 'octagon', 'star',
  'cloud', 'heart', 'rhombus', 'trapezoid', 'oval', 'x-box', 'check-box',
  'arrow-left', 'arrow-right', 'arrow-up', 'arrow-down'
] as const
export type GeoKind = typeof GEO_KINDS[number]
/** Every shape `type` of the schema. */
export type ShapeType = GeoKind | 'text' | 'note' | 'arrow' | 'line' | 'draw'
/** The family a type belongs to: it decides the shape's keys. */
export type ShapeFamily = 'geo' | 'text' | 'note' | 'link' | 'draw'

/** Text alignments. */
export const TEXT_ALIGNS = ['start', 'middle', 'end'] as const
export type TextAlign = typeof TEXT_ALIGNS[number]

/** Keys every shape has. */
export const COMMON_KEYS = ['id', 'type', 'pageId', 'x', 'y', 'rotation', 'index', 'color', 'fill', 'note', 'locked', 'createdBy'] as const
/** The keys of each family besides the common ones. */
export const FAMILY_KEYS: Readonly<Record<ShapeFamily, readonly string[]>> = {
  geo: ['w', 'h', 'text', 'textAlign'],
  text: ['text', 'fontSize', 'maxWidth', 'textAlign'],
  note: ['text'],
  link: ['x1', 'y1', 'x2', 'y2', 'fromId', 'toId', 'bend', 'text'],
  draw: ['points']
}

/** Coordinates are clamped to ±10⁷, as the server does. */
export const COORD_LIMIT = 1e7
/** Most points of one pen stroke. */
export const MAX_PEN_POINTS = 2000
/** Longest shape id. */
export const MAX_SHAPE_ID = 128
/** Longest value of a string key other than `text` and `note`. */
export const MAX_KEY_CHARS = 256

/** Whether `t` is a geo kind. */
export function isGeoKind (t: unknown): t is GeoKind {
  return typeof t === 'string' && (GEO_KINDS as readonly string[]).includes(t)
}

/** The family of a shape type; `null` for a type the schema does not know. */
export function familyOf (type: string): ShapeFamily | null {
  if (isGeoKind(type)) return 'geo'
  switch (type) {
    case 'text': return 'text'
    case 'note': return 'note'
    case 'arrow': case 'line': return 'link'
    case 'draw': return 'draw'
    default: return null
  }
}

/** A colour name as the server normalises it (`gray` → `grey`, `purple` → `violet`); `null` if unknown. */
export function normalizeColor (s: string): ColorName | null {
  const lowered = s.trim().toLowerCase().replace(/[ _]/g, '-')
  const name = lowered === 'gray' ? 'grey' : lowered === 'purple' ? 'violet' : lowered === 'light-purple' ? 'light-violet' : lowered
  return (COLOR_NAMES as readonly string[]).includes(name) ? name as ColorName : null
}

/** A fill name; `null` if unknown. */
export function normalizeFill (s: string): FillName | null {
  const name = s.trim().toLowerCase()
  return (FILL_NAMES as readonly string[]).includes(name) ? name as FillName : null
}

/** A text alignment (`left`/`center`/`right` accepted); `null` if unknown. */
export function normalizeTextAlign (s: string): TextAlign | null {
  switch (s.trim().toLowerCase()) {
    case 'start': case 'left': return 'start'
    case 'middle': case 'center': return 'middle'
    case 'end': case 'right': return 'end'
    default: return null
  }
}

/** A shape id as the document keys it (trimmed, a `shape:` prefix dropped); `null` when empty, too long or with control characters. */
export function normalizeShapeId (raw: string): string | null {
  let id = raw.trim()
  if (id.startsWith('shape:')) id = id.slice(6).trim()
  // eslint-disable-next-line no-control-regex
  if (id === '' || [...id].length > MAX_SHAPE_ID || /[\u0000-\u001f\u007f-\u009f]/.test(id)) return null
  return id
}
