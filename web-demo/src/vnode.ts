// A tiny virtual-node type: renderers return plain data (testable in Node without a DOM) and
// `toDom` turns it into SVG elements in the browser.

/** An element: tag, attributes, children; or a text node. */
export interface VNode {
  tag: string
  attrs: Record<string, string | number>
  children: Array<VNode | string>
}

/** Builds a node, dropping attributes that are `undefined`/`null`. */
export function h (tag: string, attrs: Record<string, string | number | undefined | null> = {}, children: Array<VNode | string> = []): VNode {
  const clean: Record<string, string | number> = {}
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) clean[k] = v
  return { tag, attrs: clean, children }
}

/** Depth-first search for the first node matching `pred` (used by tests and hit-testing). */
export function findNode (node: VNode, pred: (n: VNode) => boolean): VNode | null {
  if (pred(node)) return node
  for (const c of node.children) {
    if (typeof c !== 'string') {
      const f = findNode(c, pred)
      if (f !== null) return f
    }
  }
  return null
}

/** All text inside a node, in order (for tests). */
export function textOf (node: VNode | string): string {
  return typeof node === 'string' ? node : node.children.map(textOf).join('')
}

const SVG_NS = 'http://www.w3.org/2000/svg'

/** Creates real SVG DOM for a node (browser only). Text goes through text nodes, never HTML. */
export function toDom (node: VNode | string, doc: Document = document): Node {
  if (typeof node === 'string') return doc.createTextNode(node)
  const el = doc.createElementNS(SVG_NS, node.tag)
  for (const [k, v] of Object.entries(node.attrs)) el.setAttribute(k, String(v))
  for (const c of node.children) el.appendChild(toDom(c, doc))
  return el
}
