// Schema v1 shapes → SVG virtual nodes. Every shape's root is a `<g data-shape-id="ID">`
// (tests outside the app find shapes by it); locked shapes carry `data-locked="true"` and an
// "in progress" outline. Pure: no DOM, no document access.
import { fillPaint, swatch, COLOR_NAMES } from '@fairyring/client'
import { bendControl, textBox } from './geometry.js'
import { NOTE_SIZE, type Shape, type GeoShape, type LinkShape, type DrawShape, type TextShape, type NoteShape } from '@fairyring/client'
import { h, type VNode } from './vnode.js'

const STROKE = 3.5
const FONT = "'Segoe UI', system-ui, sans-serif"

const f = (n: number): string => String(Math.round(n * 100) / 100)

/** Closed polygon path through points given as fractions of a `w × h` box. */
function polygon (w: number, h: number, pts: Array<[number, number]>): string {
  return pts.map(([px, py], i) => `${i === 0 ? 'M' : 'L'}${f(px * w)},${f(py * h)}`).join(' ') + ' Z'
}

function starPoints (points: number, inner: number): Array<[number, number]> {
  const out: Array<[number, number]> = []
  for (let i = 0; i < points * 2; i++) {
    const r = i % 2 === 0 ? 0.5 : 0.5 * inner
    const a = -Math.PI / 2 + (i * Math.PI) / points
    out.push([0.5 + r * Math.cos(a), 0.5 + r * Math.sin(a)])
  }
  return out
}

function regular (sides: number, rotate = 0): Array<[number, number]> {
  const out: Array<[number, number]> = []
  for (let i = 0; i < sides; i++) {
    const a = rotate - Math.PI / 2 + (i * 2 * Math.PI) / sides
    out.push([0.5 + 0.5 * Math.cos(a), 0.5 + 0.5 * Math.sin(a)])
  }
  return out
}

/** The outline path of a geo kind in a `w × h` box (unknown kinds: a rectangle). */
export function geoPath (type: string, w: number, h: number): string {
  switch (type) {
    case 'ellipse':
    case 'oval':
      return `M0,${f(h / 2)} A${f(w / 2)},${f(h / 2)} 0 1 1 ${f(w)},${f(h / 2)} A${f(w / 2)},${f(h / 2)} 0 1 1 0,${f(h / 2)} Z`
    case 'triangle': return polygon(w, h, [[0.5, 0], [1, 1], [0, 1]])
    case 'diamond': return polygon(w, h, [[0.5, 0], [1, 0.5], [0.5, 1], [0, 0.5]])
    case 'hexagon': return polygon(w, h, [[0.25, 0], [0.75, 0], [1, 0.5], [0.75, 1], [0.25, 1], [0, 0.5]])
    case 'pentagon': return polygon(w, h, regular(5))
    case 'octagon': return polygon(w, h, regular(8, Math.PI / 8))
    case 'star': return polygon(w, h, starPoints(5, 0.45))
    case 'rhombus': return polygon(w, h, [[0.25, 0], [1, 0], [0.75, 1], [0, 1]])
    case 'trapezoid': return polygon(w, h, [[0.2, 0], [0.8, 0], [1, 1], [0, 1]])
    case 'arrow-right': return polygon(w, h, [[0, 0.25], [0.6, 0.25], [0.6, 0], [1, 0.5], [0.6, 1], [0.6, 0.75], [0, 0.75]])
    case 'arrow-left': return polygon(w, h, [[1, 0.25], [0.4, 0.25], [0.4, 0], [0, 0.5], [0.4, 1], [0.4, 0.75], [1, 0.75]])
    case 'arrow-up': return polygon(w, h, [[0.25, 1], [0.25, 0.4], [0, 0.4], [0.5, 0], [1, 0.4], [0.75, 0.4], [0.75, 1]])
    case 'arrow-down': return polygon(w, h, [[0.25, 0], [0.25, 0.6], [0, 0.6], [0.5, 1], [1, 0.6], [0.75, 0.6], [0.75, 0]])
    case 'heart':
      return `M${f(w / 2)},${f(h)} C${f(-0.1 * w)},${f(0.55 * h)} ${f(0.05 * w)},${f(-0.05 * h)} ${f(w / 2)},${f(0.25 * h)} ` +
        `C${f(0.95 * w)},${f(-0.05 * h)} ${f(1.1 * w)},${f(0.55 * h)} ${f(w / 2)},${f(h)} Z`
    case 'cloud':
      return `M${f(0.25 * w)},${f(0.85 * h)} ` +
        `A${f(0.18 * w)},${f(0.2 * h)} 0 0 1 ${f(0.12 * w)},${f(0.45 * h)} ` +
        `A${f(0.2 * w)},${f(0.22 * h)} 0 0 1 ${f(0.4 * w)},${f(0.18 * h)} ` +
        `A${f(0.22 * w)},${f(0.22 * h)} 0 0 1 ${f(0.78 * w)},${f(0.3 * h)} ` +
        `A${f(0.16 * w)},${f(0.2 * h)} 0 0 1 ${f(0.8 * w)},${f(0.85 * h)} Z`
    default:
      return `M0,0 H${f(w)} V${f(h)} H0 Z`
  }
}

/** Open strokes drawn over a geo kind's outline (never filled): the cross and the tick. */
export function geoMarks (type: string, w: number, h: number): string | null {
  if (type === 'x-box') return `M0,0 L${f(w)},${f(h)} M${f(w)},0 L0,${f(h)}`
  if (type === 'check-box') return `M${f(0.25 * w)},${f(0.5 * h)} L${f(0.45 * w)},${f(0.72 * h)} L${f(0.78 * w)},${f(0.28 * h)}`
  return null
}

/** Greedy word wrap by an estimated glyph width (0.6 em), honouring explicit newlines. */
export function wrapText (text: string, fontSize: number, maxWidth: number | null): string[] {
  const lines: string[] = []
  const perLine = maxWidth === null ? Infinity : Math.max(1, Math.floor(maxWidth / (fontSize * 0.6)))
  for (const para of text.split('\n')) {
    let line = ''
    for (const word of para.split(' ')) {
      const candidate = line === '' ? word : `${line} ${word}`
      if (candidate.length <= perLine || line === '') {
        line = candidate
      } else {
        lines.push(line)
        line = word
      }
    }
    lines.push(line)
  }
  return lines
}

function textLines (lines: string[], x: number, y: number, fontSize: number, anchor: string, color: string): VNode {
  return h('text', {
    x: f(x), y: f(y), 'font-size': fontSize, 'font-family': FONT, fill: color,
    'text-anchor': anchor, class: 'shape-text'
  }, lines.map((l, i) => h('tspan', { x: f(x), dy: i === 0 ? '1em' : '1.3em' }, [l])))
}

function anchorFor (align: string): string {
  return align === 'start' || align === 'left' ? 'start' : align === 'end' || align === 'right' ? 'end' : 'middle'
}

function renderGeo (s: GeoShape): VNode[] {
  const sw = swatch(s.color)
  const paint = fillPaint(s.color, s.fill)
  const out: VNode[] = [
    h('path', {
      d: geoPath(s.type, s.w, s.h), fill: paint.paint, 'fill-opacity': paint.opacity === 1 ? undefined : paint.opacity,
      stroke: sw.solid, 'stroke-width': STROKE, 'stroke-linejoin': 'round', 'stroke-linecap': 'round', class: 'shape-body',
      // A hollow shape is still grabbed by its inside, as in tldraw.
      'pointer-events': 'all'
    })
  ]
  const marks = geoMarks(s.type, s.w, s.h)
  if (marks !== null) {
    out.push(h('path', { d: marks, fill: 'none', stroke: sw.solid, 'stroke-width': STROKE, 'stroke-linecap': 'round', 'stroke-linejoin': 'round' }))
  }
  if (s.text !== '') {
    const size = 22
    const lines = wrapText(s.text, size, Math.max(size, s.w - 16))
    const anchor = anchorFor(s.textAlign)
    const x = anchor === 'start' ? 8 : anchor === 'end' ? s.w - 8 : s.w / 2
    const y = s.h / 2 - (lines.length * size * 1.3) / 2
    out.push(textLines(lines, x, y, size, anchor, '#1d1d1d'))
  }
  return out
}

function renderNote (s: NoteShape): VNode[] {
  const sw = swatch(s.color)
  const size = 20
  const lines = wrapText(s.text, size, NOTE_SIZE - 24)
  return [
    h('rect', { x: 2, y: 4, width: NOTE_SIZE, height: NOTE_SIZE, fill: 'rgba(0,0,0,0.12)', rx: 4 }),
    h('rect', { width: NOTE_SIZE, height: NOTE_SIZE, fill: sw.note, rx: 4, class: 'shape-body' }),
    textLines(lines, NOTE_SIZE / 2, Math.max(12, NOTE_SIZE / 2 - (lines.length * size * 1.3) / 2), size, 'middle', '#1d1d1d')
  ]
}

function renderText (s: TextShape): VNode[] {
  const sw = swatch(s.color)
  const lines = wrapText(s.text, s.fontSize, s.maxWidth)
  const box = textBox(s.text || ' ', s.fontSize, s.maxWidth)
  const anchor = anchorFor(s.textAlign === 'middle' ? 'middle' : s.textAlign)
  const x = anchor === 'start' ? 0 : anchor === 'end' ? box.w : box.w / 2
  return [
    h('rect', { width: f(box.w), height: f(box.h), fill: 'transparent', class: 'shape-body' }),
    textLines(lines, x, 0, s.fontSize, anchor, sw.solid)
  ]
}

/** The SVG path of an arrow or line, bent through `bendControl`. */
export function linkPath (s: Pick<LinkShape, 'x1' | 'y1' | 'x2' | 'y2' | 'bend'>): string {
  if (s.bend === 0) return `M${f(s.x1)},${f(s.y1)} L${f(s.x2)},${f(s.y2)}`
  const c = bendControl(s)
  return `M${f(s.x1)},${f(s.y1)} Q${f(c.x)},${f(c.y)} ${f(s.x2)},${f(s.y2)}`
}

function renderLink (s: LinkShape): VNode[] {
  const sw = swatch(s.color)
  const out: VNode[] = [
    // A wide invisible stroke makes thin lines easy to grab.
    h('path', { d: linkPath(s), stroke: 'transparent', 'stroke-width': 16, fill: 'none', class: 'shape-hit' }),
    h('path', {
      d: linkPath(s), stroke: sw.solid, 'stroke-width': STROKE, fill: 'none', 'stroke-linecap': 'round',
      'marker-end': s.type === 'arrow' ? `url(#arrowhead-${COLOR_NAMES.includes(s.color as never) ? s.color : 'black'})` : undefined,
      class: 'shape-body'
    })
  ]
  if (s.text !== '') {
    const c = bendControl(s)
    const mx = (s.x1 + s.x2) / 2 + (c.x - (s.x1 + s.x2) / 2) / 2
    const my = (s.y1 + s.y2) / 2 + (c.y - (s.y1 + s.y2) / 2) / 2
    out.push(textLines(wrapText(s.text, 18, 240), mx, my - 12, 18, 'middle', '#1d1d1d'))
  }
  return out
}

/** The SVG path through a pen stroke's points (relative to the shape's `x, y`). */
export function drawPath (points: number[]): string {
  if (points.length < 2) return ''
  const parts: string[] = []
  for (let i = 0; i + 1 < points.length; i += 2) {
    parts.push(`${i === 0 ? 'M' : 'L'}${f(points[i] ?? 0)},${f(points[i + 1] ?? 0)}`)
  }
  // A single point still shows as a dot.
  if (points.length === 2) parts.push(`L${f((points[0] ?? 0) + 0.1)},${f(points[1] ?? 0)}`)
  return parts.join(' ')
}

function renderDraw (s: DrawShape): VNode[] {
  const sw = swatch(s.color)
  return [h('path', {
    d: drawPath(s.points), stroke: sw.solid, 'stroke-width': STROKE, fill: 'none',
    'stroke-linecap': 'round', 'stroke-linejoin': 'round', class: 'shape-body'
  })]
}

/** Renders one shape; its root `<g>` carries `data-shape-id`, `data-type` and, if locked, `data-locked`. */
export function renderShape (s: Shape): VNode {
  let body: VNode[]
  let transform: string | undefined
  switch (s.kind) {
    case 'geo': body = renderGeo(s); break
    case 'note': body = renderNote(s); break
    case 'text': body = renderText(s); break
    case 'link': body = renderLink(s); break
    case 'draw': body = renderDraw(s); break
  }
  if (s.kind !== 'link') {
    transform = `translate(${f(s.x)},${f(s.y)})` + (s.rotation !== 0 ? ` rotate(${f((s.rotation * 180) / Math.PI)})` : '')
  }
  if (s.locked) {
    body.push(h('title', {}, ['in progress: a fairy is still drawing this']))
  }
  return h('g', {
    'data-shape-id': s.id,
    'data-type': s.type,
    'data-locked': s.locked ? 'true' : undefined,
    class: s.locked ? 'shape locked' : 'shape',
    transform
  }, body)
}

/** Shared `<defs>`: one arrowhead marker and one hatch pattern per colour. */
export function renderDefs (): VNode {
  const children: VNode[] = []
  for (const c of COLOR_NAMES) {
    const sw = swatch(c)
    children.push(h('marker', {
      id: `arrowhead-${c}`, viewBox: '0 0 10 10', refX: 8, refY: 5, markerWidth: 5, markerHeight: 5, orient: 'auto-start-reverse'
    }, [h('path', { d: 'M0,0 L10,5 L0,10 Z', fill: sw.solid })]))
    children.push(h('pattern', { id: `pattern-${c}`, width: 8, height: 8, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' }, [
      h('rect', { width: 8, height: 8, fill: sw.semi }),
      h('line', { x1: 0, y1: 0, x2: 0, y2: 8, stroke: sw.pattern, 'stroke-width': 3 })
    ]))
  }
  return h('defs', {}, children)
}
