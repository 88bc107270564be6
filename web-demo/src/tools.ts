// The toolbar's tools and the gesture each starts. Tool names are the `data-tool` values tests use.

/** Tools that draw a geo shape by dragging a box. */
export const GEO_TOOLS = ['rectangle', 'ellipse', 'triangle', 'diamond', 'star', 'cloud'] as const

/** Every tool, in toolbar order, with its label and keyboard shortcut. */
export const TOOLS: ReadonlyArray<{ name: string, label: string, key: string }> = [
  { name: 'select', label: 'Select', key: 'v' },
  { name: 'hand', label: 'Hand (pan)', key: 'h' },
  { name: 'rectangle', label: 'Rectangle', key: 'r' },
  { name: 'ellipse', label: 'Ellipse', key: 'o' },
  { name: 'triangle', label: 'Triangle', key: '' },
  { name: 'diamond', label: 'Diamond', key: '' },
  { name: 'star', label: 'Star', key: '' },
  { name: 'cloud', label: 'Cloud', key: '' },
  { name: 'text', label: 'Text', key: 't' },
  { name: 'note', label: 'Note', key: 'n' },
  { name: 'arrow', label: 'Arrow', key: 'a' },
  { name: 'line', label: 'Line', key: 'l' },
  { name: 'draw', label: 'Draw (pen)', key: 'd' }
]

/** Whether a tool name draws a geo shape. */
export function isGeoTool (tool: string): boolean {
  return (GEO_TOOLS as readonly string[]).includes(tool)
}

/** The tool a key selects (without modifiers), if any. */
export function toolForKey (key: string): string | null {
  const k = key.toLowerCase()
  return TOOLS.find(t => t.key !== '' && t.key === k)?.name ?? null
}

/** A click (no real drag) makes a default-sized shape: below this many screen pixels is a click. */
export const CLICK_SLOP = 4
