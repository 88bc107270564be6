// The toolbar's icons: one 16 × 16 outline drawing per tool and per action that has one, drawn
// in the button's text colour. Below `LABELS_WIDTH` px the toolbar shows these instead of the
// words (app.css), so it keeps one line down to 800 px; the word stays in the button (its
// accessible name and tooltip) and shows on wide screens. Owns the drawings only; main.ts puts
// them into the buttons.

/** From this viewport width (CSS px) up the toolbar shows words; below it, icons (app.css's media query). */
export const LABELS_WIDTH = 1340

/** SVG path data (viewBox 0 0 16 16, stroked) by tool name or action. */
export const ICONS: Readonly<Record<string, string>> = {
  select: 'M3.5 2 V13 L6.2 10.4 L8.4 14.5 L10 13.7 L7.9 9.6 H11.8 Z',
  hand: 'M5 9 V4 a1 1 0 0 1 2 0 V8 M7 7.5 V3 a1 1 0 0 1 2 0 V7.5 M9 7.5 V4 a1 1 0 0 1 2 0 V8.5 M11 8 V6 a1 1 0 0 1 2 0 V10 C13 13 11.5 14.5 9 14.5 H8 C6 14.5 5 13.5 4 12 L2.6 9.6 a1 1 0 0 1 1.7 -1 L5 9.5',
  rectangle: 'M2 3.5 H14 V12.5 H2 Z',
  ellipse: 'M2 8 A6 4.5 0 1 0 14 8 A6 4.5 0 1 0 2 8 Z',
  triangle: 'M8 2.5 L14 13.5 H2 Z',
  diamond: 'M8 1.5 L14.5 8 L8 14.5 L1.5 8 Z',
  star: 'M8 1.5 L9.9 6 L14.5 6.2 L10.9 9.2 L12.1 14 L8 11.3 L3.9 14 L5.1 9.2 L1.5 6.2 L6.1 6 Z',
  cloud: 'M4.6 12.5 A3 3 0 0 1 4.2 6.6 A4 4 0 0 1 11.8 5.6 A3.3 3.3 0 0 1 12.2 12.5 Z',
  text: 'M3 3.5 H13 M8 3.5 V13.5 M6 13.5 H10',
  note: 'M2.5 2.5 H13.5 V10 L10 13.5 H2.5 Z M13.5 10 H10 V13.5',
  arrow: 'M2.5 13.5 L13 3 M7.5 3 H13 V8.5',
  line: 'M2.5 13.5 L13.5 2.5',
  draw: 'M2 11.5 C3.5 5 6 4.5 7 9 S10.5 14 14 4',
  undo: 'M5.5 3.5 L2.5 6.5 L5.5 9.5 M2.5 6.5 H10 A3.5 3.5 0 0 1 10 13.5 H7',
  redo: 'M10.5 3.5 L13.5 6.5 L10.5 9.5 M13.5 6.5 H6 A3.5 3.5 0 0 0 6 13.5 H9',
  delete: 'M2.5 4.5 H13.5 M6 4.5 V2.5 H10 V4.5 M4 4.5 L4.8 14 H11.2 L12 4.5 M6.8 7 V11.5 M9.2 7 V11.5',
  front: 'M5.5 5.5 H14 V14 H5.5 Z M10.5 5.5 V2 H2 V10.5 H5.5',
  back: 'M2 2 H10.5 V10.5 H2 Z M10.5 5.5 H14 V14 H5.5 V10.5',
  history: 'M8 2 A6 6 0 1 1 2.3 6.1 M2 2.5 V6.2 H5.7 M8 4.5 V8 L10.5 9.5'
}

const SVG_NS = 'http://www.w3.org/2000/svg'

/**
 * Puts `name`'s icon before the button's word, which moves into a `.label` span (the button's
 * text stays the word); the word is also its `aria-label`. Nothing for a name without an icon.
 */
export function addIcon (button: HTMLElement, name: string): void {
  const d = ICONS[name]
  if (d === undefined) return
  const word = button.textContent ?? ''
  const svg = document.createElementNS(SVG_NS, 'svg')
  svg.setAttribute('class', 'icon')
  svg.setAttribute('viewBox', '0 0 16 16')
  svg.setAttribute('aria-hidden', 'true')
  const path = document.createElementNS(SVG_NS, 'path')
  path.setAttribute('d', d)
  svg.appendChild(path)
  const label = document.createElement('span')
  label.className = 'label'
  label.textContent = word
  button.replaceChildren(svg, label)
  if (!button.hasAttribute('aria-label')) button.setAttribute('aria-label', word)
}
