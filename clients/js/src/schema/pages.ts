// Pages of the document schema: `pages` maps a page id to `{name, index}` (the server creates
// `page:main` in every room). Reading is defensive (a malformed record is skipped); writing
// checks the name and index and sets only what changes.
import * as Y from 'yjs'
import { SchemaError } from './write.js'
import { compareZ, keyAbove } from './zorder.js'

/** One page. */
export interface Page { id: string, name: string, index: string }

/** Longest page name and id. */
export const MAX_PAGE_NAME = 256

/** Every page, in page order (`index`, then id). */
export function readPages (pages: Y.Map<unknown>): Page[] {
  const out: Page[] = []
  pages.forEach((v, id) => {
    if (!(v instanceof Y.Map)) return
    const name = v.get('name')
    const index = v.get('index')
    out.push({ id, name: typeof name === 'string' ? name : id, index: typeof index === 'string' ? index : '' })
  })
  return out.sort(compareZ)
}

/** The `pages` root of a document. */
export function pagesOf (doc: Y.Doc): Y.Map<unknown> {
  return doc.getMap('pages')
}

function checkPage (id: string, name: string, index: string | undefined): void {
  // eslint-disable-next-line no-control-regex
  const bad = /[\u0000-\u001f\u007f]/
  if (id.trim() === '' || id.length > MAX_PAGE_NAME || bad.test(id)) throw new SchemaError('id', 'a page id is 1–256 characters without control characters')
  if (name.length > MAX_PAGE_NAME) throw new SchemaError('name', `a page name is at most ${MAX_PAGE_NAME} characters`)
  if (index !== undefined && (index === '' || bad.test(index))) throw new SchemaError('index', "'index' must be a non-empty z-order key")
}

/**
 * Creates a page, or renames / reorders an existing one (only the keys that change), in one
 * transaction with `origin`. A new page without `index` goes after the last one.
 */
export function writePage (doc: Y.Doc, page: { id: string, name: string, index?: string }, origin: unknown = null): void {
  checkPage(page.id, page.name, page.index)
  const pages = pagesOf(doc)
  doc.transact(() => {
    const cur = pages.get(page.id)
    if (cur instanceof Y.Map) {
      if (cur.get('name') !== page.name) cur.set('name', page.name)
      if (page.index !== undefined && cur.get('index') !== page.index) cur.set('index', page.index)
      return
    }
    const m = new Y.Map<unknown>()
    m.set('name', page.name)
    m.set('index', page.index ?? keyAbove(readPages(pages).map(p => p.index)))
    pages.set(page.id, m)
  }, origin)
}

/** Deletes a page and every shape on it, in one transaction with `origin`. */
export function deletePage (doc: Y.Doc, id: string, origin: unknown = null): void {
  const pages = pagesOf(doc)
  const shapes = doc.getMap('shapes')
  doc.transact(() => {
    const gone: string[] = []
    shapes.forEach((v, sid) => { if (v instanceof Y.Map && v.get('pageId') === id) gone.push(sid) })
    for (const sid of gone) shapes.delete(sid)
    pages.delete(id)
  }, origin)
}
