//! Time as seen by the failover: the server's one clock, [`crate::clock`], re-exported at its
//! old path. Owns nothing.

pub use crate::clock::{Clock, ManualClock, SystemClock};
