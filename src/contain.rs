//! Panics contained where untrusted input meets a dependency that is not panic-free (yrs's
//! decoders and integration, its undo manager's observer registration): [`contain`] runs a
//! closure, and a panic inside it comes back as a [`Contained`] value instead of unwinding
//! further. A leaf: knows nothing of rooms, peers or fairies; callers decide what a contained
//! panic means (a refused frame, a retried registration) and log it themselves.
//!
//! Why not plain `catch_unwind`: std's panic hook runs *before* the unwind is caught. With
//! `RUST_BACKTRACE` set (common in containers) the default hook captures and symbolizes a
//! backtrace for every caught panic: milliseconds of CPU and, the first time, the binary's
//! whole debug info parsed and cached for the life of the process (128 MB measured on the
//! release binary, docs/benchmarks.md "where the memory beside 16 fairies goes, measured").
//! A hostile peer sending malformed frames would buy that for a few bytes each, and every such
//! frame printed a multi-line report on stderr. Inside [`contain`] the hook keeps one line
//! (message and location) for the caller instead; panics anywhere else go to the hook that was
//! installed before, unchanged.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::panic::{PanicHookInfo, UnwindSafe};
use std::sync::Once;

/// A panic caught by [`contain`]: its message and where it was raised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contained {
    /// The panic's message (`"<non-string payload>"` when it was not a string).
    pub message: String,
    /// `file:line:column` of the panic, when std knew it.
    pub location: Option<String>,
}

impl fmt::Display for Contained {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.location {
            Some(location) => write!(f, "{} (at {location})", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for Contained {}

thread_local! {
    /// How many [`contain`] calls are running on this thread (they may nest).
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// What the hook saw of the last panic raised inside [`contain`] on this thread.
    static LAST: RefCell<Option<Contained>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

/// Runs `work`; a panic inside it is returned as [`Contained`] (nothing printed, no backtrace
/// captured). `work` must leave no shared state half-changed when it panics, as with
/// `catch_unwind` (wrap it in `AssertUnwindSafe` only where that was checked).
pub fn contain<T>(work: impl FnOnce() -> T + UnwindSafe) -> Result<T, Contained> {
    HOOK.call_once(install);
    DEPTH.with(|depth| depth.set(depth.get() + 1));
    let outcome = std::panic::catch_unwind(work);
    DEPTH.with(|depth| depth.set(depth.get().saturating_sub(1)));
    outcome.map_err(|payload| {
        LAST.with(|last| last.borrow_mut().take())
            .unwrap_or_else(|| Contained {
                message: describe_payload(payload.as_ref()),
                location: None,
            })
    })
}

/// Puts the containing hook in front of whatever hook is installed now.
fn install() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if DEPTH.with(Cell::get) > 0 {
            let seen = describe(info);
            LAST.with(|last| *last.borrow_mut() = Some(seen));
        } else {
            previous(info);
        }
    }));
}

fn describe(info: &PanicHookInfo<'_>) -> Contained {
    Contained {
        message: describe_payload(info.payload()),
        location: info
            .location()
            .map(|at| format!("{}:{}:{}", at.file(), at.line(), at.column())),
    }
}

fn describe_payload(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "<non-string payload>".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_passes_through() {
        assert_eq!(contain(|| 7), Ok(7));
    }

    #[test]
    fn a_panic_comes_back_with_its_message_and_location() {
        let caught = contain(|| -> u8 { panic!("bad frame {}", 3) }).unwrap_err();
        assert_eq!(caught.message, "bad frame 3");
        let location = caught.location.unwrap_or_default();
        assert!(location.starts_with("src/contain.rs:"), "{location}");
        // Nothing is left behind for the next call.
        assert_eq!(contain(|| 1), Ok(1));
    }

    #[test]
    fn nested_calls_each_get_their_own_panic() {
        let outer = contain(|| -> u8 {
            let inner = contain(|| -> u8 { panic!("inner") });
            assert_eq!(inner.map_err(|c| c.message), Err("inner".to_owned()));
            panic!("outer")
        })
        .unwrap_err();
        assert_eq!(outer.message, "outer");
    }

    #[test]
    fn a_panic_outside_still_reaches_the_previous_hook() {
        contain(|| ()).unwrap_or_default();
        // A thread's panic outside `contain` is not swallowed: it unwinds to its join.
        let joined = std::thread::spawn(|| -> u8 { panic!("outside") }).join();
        let payload = joined.unwrap_err();
        assert_eq!(describe_payload(payload.as_ref()), "outside");
    }
}
