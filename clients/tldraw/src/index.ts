// @fairyring/tldraw: tldraw 5 on a fairyring room. `bindTldraw` syncs an editor's store with the
// room's document, `bindPresence` shows people and fairies as tldraw collaborators and publishes
// the local person's cursor, viewport and selection, `bindReview` draws a fairy's pending
// suggestions as ghosts to accept or reject. Re-exports only.
export * from './binding.js'
export * from './presence.js'
export * from './review.js'
export * from './records.js'
export * from './keys.js'
export * from './shapes.js'
