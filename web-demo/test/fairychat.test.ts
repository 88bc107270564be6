// Unit tests of the fairy panel a newcomer meets first (issue 47) and the cost display (issue 45): each
// fairy's own colour, spawn points spread around the inviter's view, labels and bubbles that
// never overlap, ✓ / ✗ kept inside the canvas, Enter with several fairies selected, whose
// thread the chat shows, and the usage and cost figures.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readChatItem, readChatUsage, FairyApi, type FairyChat } from '@fairyring/client'
import { enterAction, FAIRY_PALETTE, fairyColors, freeSpawnPoint, mergeFairies, shownThread, spawnPoint } from '../src/fairies.js'
import { bubbleX, labelBoxes, placeLabels, renderFairies, type FairySprite } from '../src/overlay.js'
import { actionPoints, renderGhostActions } from '../src/ghosts.js'
import { budgetLine, costLines, formatTokens, formatUsd, tokenMayUseFairies, usageLabel, type Totals } from '../src/costs.js'
import { findNode } from '../src/vnode.js'

const sprite = (over: Partial<FairySprite> = {}): FairySprite => ({
  id: 'f1', name: 'Pip', x: 10, y: 20, mode: 'idling', pose: 'idle', flip: false, hat: 'crown', color: null,
  selected: false, thinking: '', lastMessage: '', ...over
})

const overlap = (a: { x: number, y: number, w: number, h: number }, b: { x: number, y: number, w: number, h: number }): boolean =>
  a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h

test('colours: each fairy its own, the same in every browser, distinct for a room\'s first eight', () => {
  const ids = Array.from({ length: FAIRY_PALETTE.length }, (_, i) => `f-${(i * 7919).toString(16).padStart(10, '0')}`)
  const colors = fairyColors(ids)
  assert.equal(new Set(colors.values()).size, ids.length, 'all different')
  // Any order, any browser: the same answer.
  assert.deepEqual([...fairyColors([...ids].reverse())].sort(), [...colors].sort())
  for (const c of colors.values()) assert.ok(FAIRY_PALETTE.includes(c))
  // Three fairies that hash to one slot still differ.
  const three = fairyColors(['f-a', 'f-b', 'f-c'], ['#111111', '#222222', '#333333'])
  assert.equal(new Set(three.values()).size, 3)
  // Past the palette colours repeat rather than fail.
  assert.equal(fairyColors([...ids, 'f-extra']).size, ids.length + 1)
  assert.equal(fairyColors(['f1'], []).size, 0)
  // The page's model carries it, with the project colour beside it.
  const views = mergeFairies([{ id: 'f1', name: 'Pip', hat: '', chat: [] }, { id: 'f2', name: 'Dart', hat: '', chat: [] }], [], [])
  assert.notEqual(views[0]?.own, views[1]?.own)
  assert.equal(views[0]?.color, null)
})

test('spawn points: fairies invited one after another land apart, around the view and inside it', () => {
  const view = { x: 100, y: 50, w: 1100, h: 800 }
  const points = Array.from({ length: 12 }, (_, i) => spawnPoint(view, i))
  for (let i = 0; i < points.length; i++) {
    for (let j = i + 1; j < points.length; j++) {
      const a = points[i]; const b = points[j]
      assert.ok(a !== undefined && b !== undefined)
      assert.ok(Math.hypot(a.x - b.x, a.y - b.y) >= 60, `spots ${i} and ${j} are apart (${JSON.stringify([a, b])})`)
    }
  }
  for (const p of points.slice(0, 8)) {
    assert.ok(p.x > view.x && p.x < view.x + view.w && p.y > view.y && p.y < view.y + view.h, `inside the view: ${JSON.stringify(p)}`)
    // Around the centre, not on it (the drawing goes there).
    assert.ok(Math.hypot(p.x - 650, p.y - 450) >= 200)
  }
  assert.deepEqual(spawnPoint(view, 2), spawnPoint(view, 2), 'deterministic')
  assert.deepEqual(spawnPoint(view, Number.NaN), spawnPoint(view, 0))
  // The next free spot: after the second of three left, the next one takes its place, not the third's.
  assert.deepEqual(freeSpawnPoint(view, []), spawnPoint(view, 0))
  assert.deepEqual(freeSpawnPoint(view, [spawnPoint(view, 0), spawnPoint(view, 2)]), spawnPoint(view, 1))
  assert.deepEqual(freeSpawnPoint(view, [spawnPoint(view, 0), { x: spawnPoint(view, 1).x + 10, y: spawnPoint(view, 1).y }]), spawnPoint(view, 2))
  // A tiny view still spreads them (at least 80 px from the centre).
  const tiny = spawnPoint({ x: 0, y: 0, w: 10, h: 10 }, 0)
  assert.ok(Math.hypot(tiny.x - 5, tiny.y - 5) >= 79)
})

test('invite: the spawn point goes in the body as position', async () => {
  const calls: unknown[] = []
  const fetchFn = (async (_url: string, init?: RequestInit) => {
    calls.push(JSON.parse(String(init?.body)))
    return new Response(JSON.stringify({ id: 'f-1' }), { status: 201, headers: { 'content-type': 'application/json' } })
  }) as unknown as typeof fetch
  const api = new FairyApi('r', () => null, fetchFn)
  await api.invite('Pip', 'direct', { x: 10.4, y: -3.6 })
  await api.invite('', 'direct', { x: Number.NaN, y: 1 })
  assert.deepEqual(calls, [{ name: 'Pip', position: { x: 10, y: -4 } }, {}])
})

test('labels and bubbles: three fairies on one spot get labels and bubbles that do not overlap', () => {
  const three = ['Pip', 'Dart', 'Echo'].map((name, i) => sprite({ id: `f${i}`, name, x: 300, y: 200, lastMessage: `I am ${name} and I drew a house` }))
  const places = placeLabels(three)
  const boxes = three.map(s => labelBoxes(s, places.get(s.id)))
  const all = boxes.flatMap(b => b.bubble !== null ? [b.label, b.bubble] : [b.label])
  assert.equal(all.length, 6)
  for (let i = 0; i < all.length; i++) {
    for (let j = i + 1; j < all.length; j++) {
      const a = all[i]; const b = all[j]
      assert.ok(a !== undefined && b !== undefined && !overlap(a, b), `boxes ${i} and ${j} overlap: ${JSON.stringify([a, b])}`)
    }
  }
  // Far apart: the usual places.
  const apart = placeLabels([sprite({ id: 'a', x: 0 }), sprite({ id: 'b', x: 900, lastMessage: 'hi' })])
  assert.deepEqual([...apart.values()], [{ label: 0, bubble: 0 }, { label: 0, bubble: 0 }])
  // The rendering uses the places and the fairy's colour.
  const v = renderFairies(three.map(s => ({ ...s, color: '#2563eb' })))
  const labels = three.map(s => findNode(v, n => n.attrs['data-fairy'] === s.id))
  const ys = labels.map(g => g !== null ? findNode(g, n => n.attrs.class === 'label')?.attrs.y : undefined)
  assert.equal(new Set(ys).size, 3, `three label heights (${JSON.stringify(ys)})`)
  assert.equal(labels[0]?.attrs['data-color'], '#2563eb')
})

test('bubbles: a sprite near the visible canvas\'s right edge (or the sidebar over it) speaks to its left, inside the view', () => {
  const view = { x: 0, y: 0, w: 800, h: 600 }
  const near = sprite({ id: 'r', x: 760, y: 300, lastMessage: 'Drew a house: walls, roof, door and window' })
  const box = labelBoxes(near, { label: 0, bubble: 0 }, view).bubble
  assert.ok(box !== null && box.x >= view.x && box.x + box.w <= view.x + view.w, `inside the view: ${JSON.stringify(box)}`)
  assert.equal(bubbleX(near, box?.w ?? 0, view).side, 'left')
  assert.ok(box !== null && box.x + box.w <= near.x, 'left of the sprite')
  // Without a view, or with room on the right: the usual place.
  assert.equal(labelBoxes(near).bubble?.x, near.x + 20)
  assert.deepEqual(bubbleX(sprite({ x: 100 }), 200, view), { x: 120, side: 'right' })
  // Too narrow for either side: pushed inside it.
  const narrow = { x: 0, y: 0, w: 220, h: 600 }
  const squeezed = bubbleX(sprite({ x: 110 }), 200, narrow)
  assert.ok(squeezed.x >= 0 && squeezed.x + 200 <= 220, JSON.stringify(squeezed))
  // The drawing follows: the bubble's group is translated left of the sprite and says so.
  const v = renderFairies([near], view)
  const g = findNode(v, n => n.attrs['data-bubble'] !== undefined)
  assert.equal(g?.attrs['data-bubble-side'], 'left')
  assert.ok(String(g?.attrs.transform).startsWith('translate(-'), String(g?.attrs.transform))
})

test('ghost controls: ✓ and ✗ stay inside the canvas when the ghost is at its top or right edge', () => {
  const view = { x: 0, y: 0, w: 800, h: 600 }
  // A ghost whose frame starts above the visible area (under the toolbar) and ends past its right.
  const frame = { x: 700, y: -30, w: 200, h: 120 }
  for (const zoom of [0.5, 1, 2]) {
    const { accept, reject } = actionPoints(frame, zoom, view)
    const r = 11 / zoom
    for (const p of [accept, reject]) {
      assert.ok(p.x - r >= view.x && p.x + r <= view.x + view.w && p.y - r >= view.y && p.y + r <= view.y + view.h,
        `inside at zoom ${zoom}: ${JSON.stringify(p)}`)
    }
    assert.ok(reject.y > accept.y + r, 'one above the other, apart')
  }
  // Inside the view: where they always were (astride the frame's right edge).
  assert.deepEqual(actionPoints({ x: 100, y: 100, w: 50, h: 50 }, 1, view), { accept: { x: 150, y: 114 }, reject: { x: 150, y: 140 } })
  // A ghost wholly out of view keeps them with it (nothing floats at the edge).
  assert.deepEqual(actionPoints({ x: 2000, y: 2000, w: 50, h: 50 }, 1, view).accept, { x: 2050, y: 2014 })
  // Rendered: the buttons' circles use the clamped points.
  const ghost = {
    id: 's1', fairyId: 'f1', requestId: 'r1', op: 'create' as const, shapeId: 'b', streaming: false, status: 'pending',
    proposed: { id: 'b', kind: 'geo', type: 'rectangle', pageId: '', x: 700, y: -24, w: 188, h: 108, rotation: 0, index: '', color: 'black', fill: 'none', note: '', locked: false, createdBy: '' },
    current: null
  }
  const v = renderGhostActions(ghost as never, 1, view)
  const circle = v !== null ? findNode(v, n => n.tag === 'circle') : null
  assert.ok(circle !== null && Number(circle.attrs.cy) >= 11 && Number(circle.attrs.cx) <= 789, JSON.stringify(circle?.attrs))
})

test('Enter: one fairy is prompted; two or more selected start one project, never the same prompt to each', () => {
  assert.deepEqual(enterAction(['f1'], ['f1', 'f2']), { kind: 'prompt', to: 'f1' })
  assert.deepEqual(enterAction([], ['f1']), { kind: 'prompt', to: 'f1' })
  assert.deepEqual(enterAction(['f2', 'f1'], ['f1', 'f2', 'f3']), { kind: 'project', fairyIds: ['f2', 'f1'] })
  // A selected fairy that left no longer counts.
  assert.deepEqual(enterAction(['f1', 'gone'], ['f1', 'f2']), { kind: 'prompt', to: 'f1' })
  assert.equal(enterAction([], ['f1', 'f2']).kind, 'none')
  assert.match((enterAction([], []) as { why: string }).why, /Invite a fairy/)
})

test('chat thread: the picked tab, else the first selected fairy, else the one that spoke last', () => {
  const chat = (id: string, at: number): FairyChat => ({ id, name: id, hat: '', chat: at > 0 ? [{ from: `fairy:${id}`, role: 'fairy', text: 'x', at, requestId: null, rejected: false }] : [] })
  const chats = [chat('a', 5), chat('b', 9), chat('c', 0)]
  assert.equal(shownThread(chats, ['c', 'a'], null), 'c')
  assert.equal(shownThread(chats, ['c'], 'a'), 'a')
  assert.equal(shownThread(chats, [], null), 'b')
  assert.equal(shownThread(chats, ['gone'], 'gone'), 'b')
  assert.equal(shownThread([chat('z', 0)], [], null), 'z')
  assert.equal(shownThread([], ['a'], 'a'), null)
})

test('usage: a chat item\'s usage is read defensively and shown with its cost', () => {
  const item = readChatItem({ from: 'fairy:f1', role: 'fairy', text: 'done', at: 1, requestId: 'r1', usage: { calls: 2, inputTokens: 1234, outputTokens: 56, cacheReadInputTokens: 900, cacheCreationInputTokens: 0, costUsd: 0.0012 } })
  assert.deepEqual(item?.usage, { calls: 2, inputTokens: 1234, outputTokens: 56, cacheReadInputTokens: 900, cacheCreationInputTokens: 0, costUsd: 0.0012 })
  assert.equal(usageLabel(item?.usage ?? { calls: 0, inputTokens: 0, outputTokens: 0, cacheReadInputTokens: 0, cacheCreationInputTokens: 0 }), '2 calls · 1,234 in · 56 out · 900 cached · $0.0012')
  assert.equal(usageLabel({ calls: 1, inputTokens: 10, outputTokens: 2, cacheReadInputTokens: 0, cacheCreationInputTokens: 0 }), '1 call · 10 in · 2 out · no price')
  assert.equal(readChatItem({ text: 'x' })?.usage, undefined)
  assert.equal(readChatUsage({ calls: 'many' }), null)
  assert.deepEqual(readChatUsage({ calls: 1, inputTokens: -5, costUsd: 'free' }), { calls: 1, inputTokens: 0, outputTokens: 0, cacheReadInputTokens: 0, cacheCreationInputTokens: 0 })
  assert.deepEqual([formatTokens(950), formatTokens(12345), formatTokens(123456), formatTokens(1_200_000), formatTokens(-1)], ['950', '12,345', '123k', '1.2M', '0'])
  assert.deepEqual([formatUsd(1.234), formatUsd(0.042), formatUsd(0.0012), formatUsd(0), formatUsd(1e-9)], ['$1.23', '$0.042', '$0.0012', '$0', '<$0.000001'])
})

test('cost bar: the room this hour and you today, against their budgets, with money when priced', () => {
  const totals = (over: Partial<Totals> = {}): Totals => ({
    calls: 3, inputTokens: 9000, outputTokens: 800, cacheReadInputTokens: 5000, cacheCreationInputTokens: 200, costUsd: 0.0123, unpricedCalls: 0, estimatedCalls: 0, ...over
  })
  const room = budgetLine('Room this hour', totals(), 1_000_000)
  assert.equal(room.used, 10_000, 'input + output + cache writes: what the budget counts')
  assert.equal(room.fraction, 0.01)
  assert.equal(room.text, 'Room this hour: 10,000 of 1M tokens · $0.012')
  const unpriced = budgetLine('You today', totals({ unpricedCalls: 3, costUsd: 0 }), 0)
  assert.equal(unpriced.text, 'You today: 10,000 tokens (no limit)')
  assert.equal(unpriced.fraction, null)
  const lines = costLines({
    hour: { total: totals(), fairies: {}, people: {}, projects: {} },
    day: { total: totals(), fairies: {}, people: {}, projects: {} },
    you: totals({ inputTokens: 100, outputTokens: 10, cacheCreationInputTokens: 0 }),
    budgets: { roomPerHour: 1_000_000, personPerDay: 500, projectPerDay: 0 }
  })
  assert.deepEqual(lines.map(l => [l.used, l.limit]), [[10_000, 1_000_000], [110, 500]])
})

test('cost bar: only a token that may use fairies asks for /usage (no refused call on load)', () => {
  const jwt = (claims: unknown): string => `h.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.s`
  assert.equal(tokenMayUseFairies(jwt({ scope: 'read write' })), false)
  assert.equal(tokenMayUseFairies(jwt({ scope: 'read write fairies' })), true)
  assert.equal(tokenMayUseFairies(jwt({ scope: ['admin'] })), true)
  assert.equal(tokenMayUseFairies(jwt({ sub: 'x' })), true, 'no scope claim: the server decides')
  assert.equal(tokenMayUseFairies(null), true)
  assert.equal(tokenMayUseFairies('not a token'), true)
  assert.equal(tokenMayUseFairies('a.%%%.c'), true)
})
