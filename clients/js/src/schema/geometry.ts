// Plain geometry types shared by the schema readers, awareness and the API bodies: a point and
// an axis-aligned box in page coordinates. Types only; drawing maths belongs to each client.

/** A point in page coordinates. */
export interface Point { x: number, y: number }
/** An axis-aligned box in page coordinates (`x, y` its top-left). */
export interface Box { x: number, y: number, w: number, h: number }
