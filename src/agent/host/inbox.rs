//! A fairy's inbox: how callers reach its host task without ever being refused. It holds one
//! pending [`Interrupt`] (a newer interrupt merges into one the host has not taken yet, see
//! [`Interrupt::merge`], so memory stays bounded however many arrive), a dismissal flag that
//! takes precedence over it, and a short queue of request rejections ([`RevertJob`], each
//! with the channel its answer goes back on; at most [`MAX_PENDING_REVERTS`], taken before the
//! interrupt); a [`Notify`] wakes the host. Once the host task ends the inbox is closed and
//! refuses with [`Closed`].
//!
//! The state sits behind a short critical section, never held across an `.await`.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

use crate::agent::apply::ledger::RevertOutcome;
use crate::agent::runtime::revert::RevertError;
use crate::agent::state::Interrupt;
use crate::ids::RequestId;

/// Rejections waiting for the host at most; more are refused ([`RevertRefused::Full`]).
pub const MAX_PENDING_REVERTS: usize = 8;

/// The fairy's host task has ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the fairy is no longer hosted")]
pub struct Closed;

/// Why a rejection was not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RevertRefused {
    /// The fairy's host task has ended.
    #[error(transparent)]
    Closed(#[from] Closed),
    /// [`MAX_PENDING_REVERTS`] rejections are already waiting.
    #[error("{MAX_PENDING_REVERTS} rejections of this fairy's requests are already waiting")]
    Full,
}

/// A person rejects request `request`: the host interrupts the fairy, takes the request back
/// and answers on `reply`.
#[derive(Debug)]
pub struct RevertJob {
    /// The request to take back.
    pub request: RequestId,
    /// Where the outcome goes.
    pub reply: oneshot::Sender<Result<RevertOutcome, RevertError>>,
}

impl PartialEq for RevertJob {
    fn eq(&self, other: &Self) -> bool {
        self.request == other.request
    }
}

/// What the host takes out of the inbox.
#[derive(Debug, PartialEq)]
pub enum Signal {
    /// Leave the room (taken before anything else).
    Dismiss,
    /// Take a request back (taken before a pending interrupt).
    Revert(RevertJob),
    /// Carry out this (possibly merged) interrupt.
    Interrupt(Interrupt),
}

#[derive(Default)]
struct Pending {
    interrupt: Option<Interrupt>,
    reverts: VecDeque<RevertJob>,
    dismiss: bool,
    closed: bool,
}

/// One fairy's inbox.
#[derive(Default)]
pub struct Inbox {
    pending: Mutex<Pending>,
    wake: Notify,
    ended: CancellationToken,
}

impl Inbox {
    /// An empty, open inbox.
    pub fn new() -> Self {
        Inbox::default()
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Delivers an interrupt, merging it into one not taken yet.
    pub fn interrupt(&self, interrupt: Interrupt) -> Result<(), Closed> {
        {
            let mut pending = self.lock();
            if pending.closed {
                return Err(Closed);
            }
            match &mut pending.interrupt {
                Some(earlier) => earlier.merge(interrupt),
                None => pending.interrupt = Some(interrupt),
            }
        }
        self.wake.notify_one();
        Ok(())
    }

    /// Asks the host to dismiss the fairy.
    pub fn dismiss(&self) -> Result<(), Closed> {
        {
            let mut pending = self.lock();
            if pending.closed {
                return Err(Closed);
            }
            pending.dismiss = true;
        }
        self.wake.notify_one();
        Ok(())
    }

    /// Delivers a rejection; refused when the host has ended or too many wait.
    pub fn revert(&self, job: RevertJob) -> Result<(), RevertRefused> {
        {
            let mut pending = self.lock();
            if pending.closed {
                return Err(Closed.into());
            }
            if pending.reverts.len() >= MAX_PENDING_REVERTS {
                return Err(RevertRefused::Full);
            }
            pending.reverts.push_back(job);
        }
        self.wake.notify_one();
        Ok(())
    }

    fn take(&self) -> Option<Signal> {
        let mut pending = self.lock();
        if pending.dismiss {
            pending.dismiss = false;
            pending.interrupt = None;
            // Their callers see the reply channel close.
            pending.reverts.clear();
            return Some(Signal::Dismiss);
        }
        if let Some(job) = pending.reverts.pop_front() {
            return Some(Signal::Revert(job));
        }
        pending.interrupt.take().map(Signal::Interrupt)
    }

    /// The next signal, waiting for one. Cancel-safe: nothing is taken until it returns.
    pub async fn recv(&self) -> Signal {
        loop {
            if let Some(signal) = self.take() {
                return signal;
            }
            // `notify_one` keeps a permit when nobody waits, so no delivery is missed between
            // `take` and here.
            self.wake.notified().await;
        }
    }

    /// The host task ended: refuse from now on and wake whoever waits in [`Inbox::ended`]
    /// (rejections still waiting are dropped: their callers see the reply channel close).
    pub fn close(&self) {
        {
            let mut pending = self.lock();
            pending.closed = true;
            pending.reverts.clear();
        }
        self.ended.cancel();
    }

    /// Resolves once the inbox is closed.
    pub async fn ended(&self) {
        self.ended.cancelled().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::modes::Mode;
    use crate::agent::state::Request;

    fn prompt(message: &str) -> Interrupt {
        Interrupt {
            input: Some(Request::follow_up(message, None)),
            mode: None,
        }
    }

    #[tokio::test]
    async fn interrupts_not_taken_merge_and_nothing_is_refused() {
        let inbox = Inbox::new();
        for i in 0..1000 {
            assert_eq!(inbox.interrupt(prompt(&i.to_string())), Ok(()));
        }
        assert_eq!(
            inbox.interrupt(Interrupt {
                input: None,
                mode: Some(Mode::Soloing)
            }),
            Ok(())
        );
        assert_eq!(inbox.interrupt(prompt("last")), Ok(()));
        let Signal::Interrupt(merged) = inbox.recv().await else {
            panic!("an interrupt");
        };
        assert_eq!(merged.mode, Some(Mode::Soloing));
        assert_eq!(merged.input.map(|r| r.messages), Some(vec!["last".into()]));
        assert_eq!(inbox.take(), None, "one slot: everything was merged");
    }

    #[tokio::test]
    async fn a_dismissal_goes_first_and_a_closed_inbox_refuses() {
        let inbox = std::sync::Arc::new(Inbox::new());
        let waiting = tokio::spawn({
            let inbox = inbox.clone();
            async move { inbox.recv().await }
        });
        tokio::task::yield_now().await;
        assert_eq!(inbox.interrupt(prompt("a")), Ok(()));
        assert!(matches!(waiting.await, Ok(Signal::Interrupt(_))));
        assert_eq!(inbox.interrupt(prompt("b")), Ok(()));
        assert_eq!(inbox.dismiss(), Ok(()));
        assert_eq!(inbox.recv().await, Signal::Dismiss);
        assert_eq!(
            inbox.take(),
            None,
            "the dismissal dropped the pending interrupt"
        );
        inbox.close();
        inbox.ended().await;
        assert_eq!(inbox.interrupt(prompt("c")), Err(Closed));
        assert_eq!(inbox.dismiss(), Err(Closed));
    }

    fn job(
        id: &str,
    ) -> (
        RevertJob,
        oneshot::Receiver<Result<RevertOutcome, RevertError>>,
    ) {
        let (reply, rx) = oneshot::channel();
        let request = RequestId::parse(id).unwrap_or_else(|e| panic!("{e}"));
        (RevertJob { request, reply }, rx)
    }

    #[tokio::test]
    async fn rejections_queue_before_the_interrupt_and_are_bounded() {
        let inbox = Inbox::new();
        assert_eq!(inbox.interrupt(prompt("a")), Ok(()));
        let mut waiting = Vec::new();
        for i in 0..MAX_PENDING_REVERTS {
            let (j, rx) = job(&format!("r{i}"));
            assert_eq!(inbox.revert(j), Ok(()));
            waiting.push(rx);
        }
        let (extra, _) = job("r-extra");
        assert_eq!(inbox.revert(extra), Err(RevertRefused::Full));
        match inbox.recv().await {
            Signal::Revert(j) => assert_eq!(j.request.as_str(), "r0"),
            other => panic!("a rejection first, got {other:?}"),
        }
        assert_eq!(inbox.dismiss(), Ok(()));
        assert_eq!(inbox.recv().await, Signal::Dismiss);
        // The dismissal dropped the rest: their callers are answered by the closed channel.
        assert!(waiting.pop().is_some_and(|mut rx| rx.try_recv().is_err()));
        assert_eq!(inbox.take(), None);
    }
}
