// The binding's editor-free conversions: z-order keys keep their order both ways, rich text
// reads as plain text and is kept only when plain text cannot hold it.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { toRichText, type TLRichText } from 'tldraw'
import { fromTldrawIndex, isTldrawIndex, plainHolds, plainRich, plainText, richFrom, toTldrawIndex } from '../src/keys.js'

test('document indexes: tldraw keys as they are, others encoded in order and decoded back', () => {
  assert.equal(toTldrawIndex('a1'), 'a1')
  assert.equal(isTldrawIndex('a1V'), true)
  assert.equal(isTldrawIndex('80'), false)
  assert.equal(isTldrawIndex('a10'), false, 'a fraction may not end in 0')
  // The server's hex keys, the demo's base-62 keys and tldraw's keys, sorted as plain strings.
  const keys = ['80', '8080', '810080', '81ff80', '82000080', 'V', 'Zz', 'a0', 'a0V', 'a1', 'a1V', 'a2'].sort()
  const encoded = keys.map(toTldrawIndex)
  for (const k of encoded) assert.equal(isTldrawIndex(k), true, `${k} is a valid tldraw index`)
  const nonTl = keys.filter(k => !isTldrawIndex(k))
  const enc = nonTl.map(toTldrawIndex)
  assert.deepEqual([...enc].sort(), enc, 'encoded keys keep their order')
  for (const k of keys) assert.equal(fromTldrawIndex(toTldrawIndex(k)), k, `${k} round-trips`)
  assert.ok(toTldrawIndex('ff') < 'a1', 'encoded keys sort below tldraw\'s own first keys')
})

test('rich text: plain text read, kept only when plain cannot hold it', () => {
  const plain = toRichText('one\ntwo')
  assert.equal(plainText(plain), 'one\ntwo')
  assert.equal(plainHolds(plain), true)
  const bold = { type: 'doc', content: [{ type: 'paragraph', content: [{ type: 'text', text: 'bold', marks: [{ type: 'bold' }] }] }] } as unknown as TLRichText
  assert.equal(plainText(bold), 'bold')
  assert.equal(plainHolds(bold), false)
  assert.deepEqual(richFrom('bold', bold), bold, 'kept rich text used while the plain text agrees')
  assert.deepEqual(richFrom('changed', bold), toRichText('changed'), 'a changed plain text wins')
  // One rich text object per plain text (tldraw caches a label's HTML by that object).
  assert.equal(richFrom('same words', null), richFrom('same words', undefined), 'the same plain text gives the same object')
  assert.equal(plainRich('same words'), richFrom('same words', null))
  assert.deepEqual(plainRich('same words'), toRichText('same words'))
  assert.notEqual(plainRich('other words'), plainRich('same words'))
  const list = { type: 'doc', content: [{ type: 'bulletList', content: [{ type: 'listItem', content: [{ type: 'paragraph', content: [{ type: 'text', text: 'a' }] }] }, { type: 'listItem', content: [{ type: 'paragraph', content: [{ type: 'text', text: 'b' }] }] }] }] } as unknown as TLRichText
  assert.equal(plainText(list), 'a\nb')
})
