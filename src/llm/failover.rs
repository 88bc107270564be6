//! Auth profiles and failover: which key/endpoint the next attempt uses, cooldowns of failed
//! profiles (1 s doubling to 60 s, reset on success, at least the provider's `retry-after`),
//! and the retry loop that turns one logical request into attempts.
//!
//! Owns: [`Profile`], the [`Provider`] trait (one attempt on one profile), [`Cooldowns`] and
//! [`FailoverModel`]. Must not know wire formats; time comes from an injected [`Clock`].

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{StreamExt, stream};

use super::error::LlmError;
use super::types::{Model, ModelEvent, ModelRequest, ModelStream};
use super::usage::{Usage, UsageLedger};
use crate::clock::Clock;

/// First cooldown of a failed profile.
pub const COOLDOWN_BASE: Duration = Duration::from_secs(1);
/// Longest cooldown after repeated failures.
pub const COOLDOWN_MAX: Duration = Duration::from_secs(60);

/// One way to reach a provider: an endpoint and a key.
#[derive(Clone, PartialEq, Eq)]
pub struct Profile {
    /// A label safe for logs (`key#2@api.anthropic.com`), never the key itself.
    pub label: String,
    /// Base URL without trailing slash or `/v1`.
    pub base_url: String,
    /// The API key, when the endpoint needs one.
    pub api_key: Option<String>,
}

impl Profile {
    /// A profile; the base URL is normalised (`/` and `/v1` suffixes removed).
    pub fn new(label: impl Into<String>, base_url: &str, api_key: Option<String>) -> Self {
        let mut base = base_url.trim().trim_end_matches('/');
        if let Some(b) = base.strip_suffix("/v1") {
            base = b;
        }
        Profile {
            label: label.into(),
            base_url: base.to_owned(),
            api_key,
        }
    }
}

impl fmt::Debug for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Profile")
            .field("label", &self.label)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// A wire format: makes one attempt of a request on one profile (no retry).
pub trait Provider: Send + Sync {
    /// `provider:model`, for logs.
    fn name(&self) -> String;
    /// Streams one attempt; refusals and transport failures come out as the stream's `Err`.
    fn attempt(&self, profile: &Profile, request: &ModelRequest) -> ModelStream;
}

/// The cooldown after `failures` consecutive failures: 1 s, 2 s, 4 s, … capped at 60 s.
pub fn cooldown_for(failures: u32) -> Duration {
    let shift = failures.saturating_sub(1).min(16);
    COOLDOWN_BASE
        .saturating_mul(1u32 << shift)
        .min(COOLDOWN_MAX)
}

/// Which profile to use next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// This profile is usable now.
    Ready(usize),
    /// Every profile is cooling; this one is the first to recover, after the wait.
    Wait(usize, Duration),
}

/// The cooldown state of every profile, in priority order.
#[derive(Debug, Clone)]
pub struct Cooldowns {
    slots: Vec<Slot>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    failures: u32,
    until: Option<Instant>,
}

impl Cooldowns {
    /// `n` profiles, none cooling. `n` must be at least 1 for [`Cooldowns::pick`] to pick.
    pub fn new(n: usize) -> Self {
        Cooldowns {
            slots: vec![Slot::default(); n],
        }
    }

    /// The first profile (in priority order) not cooling at `now`, or the one that recovers first.
    pub fn pick(&self, now: Instant) -> Option<Pick> {
        let mut soonest: Option<(usize, Instant)> = None;
        for (i, s) in self.slots.iter().enumerate() {
            match s.until {
                None => return Some(Pick::Ready(i)),
                Some(u) if u <= now => return Some(Pick::Ready(i)),
                Some(u) => {
                    if soonest.is_none_or(|(_, best)| u < best) {
                        soonest = Some((i, u));
                    }
                }
            }
        }
        soonest.map(|(i, u)| Pick::Wait(i, u.saturating_duration_since(now)))
    }

    /// Records a failure of profile `i`; returns its cooldown (at least `retry_after`).
    pub fn fail(&mut self, i: usize, now: Instant, retry_after: Option<Duration>) -> Duration {
        let Some(slot) = self.slots.get_mut(i) else {
            return Duration::ZERO;
        };
        slot.failures = slot.failures.saturating_add(1);
        let d = cooldown_for(slot.failures).max(retry_after.unwrap_or_default());
        slot.until = Some(now + d);
        d
    }

    /// Records a success of profile `i`: its cooldown and failure count reset.
    pub fn succeed(&mut self, i: usize) {
        if let Some(slot) = self.slots.get_mut(i) {
            *slot = Slot::default();
        }
    }

    /// Consecutive failures of profile `i`.
    pub fn failures(&self, i: usize) -> u32 {
        self.slots.get(i).map_or(0, |s| s.failures)
    }
}

/// Retry policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailoverConfig {
    /// Retries after the first attempt (so at most `max_retries + 1` requests).
    pub max_retries: u32,
}

impl Default for FailoverConfig {
    fn default() -> Self {
        FailoverConfig { max_retries: 4 }
    }
}

/// A [`Model`] over one provider and several profiles, with failover and cooldowns shared by
/// every request of this model.
pub struct FailoverModel {
    provider: Arc<dyn Provider>,
    profiles: Arc<[Profile]>,
    cooldowns: Arc<Mutex<Cooldowns>>,
    clock: Arc<dyn Clock>,
    config: FailoverConfig,
    ledger: Arc<Mutex<UsageLedger>>,
}

impl FailoverModel {
    /// A model over `profiles` (in priority order); at least one is required.
    pub fn new(
        provider: Arc<dyn Provider>,
        profiles: Vec<Profile>,
        clock: Arc<dyn Clock>,
        config: FailoverConfig,
    ) -> Result<Self, LlmError> {
        if profiles.is_empty() {
            return Err(LlmError::Config(
                "no profile (key or endpoint) configured".into(),
            ));
        }
        Ok(FailoverModel {
            cooldowns: Arc::new(Mutex::new(Cooldowns::new(profiles.len()))),
            provider,
            profiles: profiles.into(),
            clock,
            config,
            ledger: Arc::default(),
        })
    }

    /// Usage of every completed request of this model (failed attempts are not counted).
    pub fn usage(&self) -> UsageLedger {
        self.ledger
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Consecutive failures of each profile (for tests and diagnostics).
    pub fn failures(&self) -> Vec<u32> {
        let c = lock(&self.cooldowns);
        (0..self.profiles.len()).map(|i| c.failures(i)).collect()
    }
}

fn lock(m: &Mutex<Cooldowns>) -> std::sync::MutexGuard<'_, Cooldowns> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The state of one logical request across its attempts.
struct Run {
    provider: Arc<dyn Provider>,
    profiles: Arc<[Profile]>,
    cooldowns: Arc<Mutex<Cooldowns>>,
    clock: Arc<dyn Clock>,
    config: FailoverConfig,
    ledger: Arc<Mutex<UsageLedger>>,
    request: ModelRequest,
    attempt_usage: Usage,
    attempts: u32,
    current: Option<(usize, ModelStream)>,
    delivered_text: bool,
    queue: VecDeque<Result<ModelEvent, LlmError>>,
    finished: bool,
}

impl Run {
    async fn next(&mut self) -> Option<Result<ModelEvent, LlmError>> {
        loop {
            if let Some(item) = self.queue.pop_front() {
                return Some(item);
            }
            if self.finished {
                return None;
            }
            let Some((idx, stream)) = self.current.as_mut() else {
                self.start_attempt().await;
                continue;
            };
            let idx = *idx;
            let item = stream.next().await;
            match item {
                Some(Ok(ev)) => {
                    match &ev {
                        ModelEvent::TextDelta(_) => self.delivered_text = true,
                        ModelEvent::Usage(u) => self.attempt_usage = *u,
                        ModelEvent::Done { .. } => {
                            lock(&self.cooldowns).succeed(idx);
                            self.ledger
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .record(self.attempt_usage);
                            self.finished = true;
                            self.current = None;
                        }
                        _ => {}
                    }
                    return Some(Ok(ev));
                }
                Some(Err(e)) => self.on_failure(idx, e),
                None => self.on_failure(idx, LlmError::Truncated),
            }
        }
    }

    /// Picks a profile (waiting for the first to recover if all are cooling) and opens a stream.
    async fn start_attempt(&mut self) {
        let pick = lock(&self.cooldowns).pick(self.clock.now());
        let idx = match pick {
            Some(Pick::Ready(i)) => i,
            Some(Pick::Wait(i, d)) => {
                tracing::info!(profile = %self.label(i), wait_ms = d.as_millis() as u64, "all model profiles cooling; waiting");
                self.clock.sleep(d).await;
                i
            }
            None => {
                self.finished = true;
                self.queue
                    .push_back(Err(LlmError::Config("no profile configured".into())));
                return;
            }
        };
        self.attempts += 1;
        self.attempt_usage = Usage::default();
        let Some(profile) = self.profiles.get(idx) else {
            self.finished = true;
            return;
        };
        tracing::debug!(provider = %self.provider.name(), profile = %profile.label, attempt = self.attempts, "model request");
        self.current = Some((idx, self.provider.attempt(profile, &self.request)));
    }

    fn label(&self, i: usize) -> String {
        self.profiles
            .get(i)
            .map(|p| p.label.clone())
            .unwrap_or_default()
    }

    /// Classifies a failed attempt: give up, or queue a [`ModelEvent::Retry`].
    fn on_failure(&mut self, idx: usize, error: LlmError) {
        self.current = None;
        if !error.is_retriable() {
            tracing::warn!(profile = %self.label(idx), %error, "model request failed; not retriable");
            self.finished = true;
            self.queue.push_back(Err(error));
            return;
        }
        let now = self.clock.now();
        let cooldown = lock(&self.cooldowns).fail(idx, now, error.retry_after());
        tracing::warn!(profile = %self.label(idx), %error, cooldown_ms = cooldown.as_millis() as u64, attempt = self.attempts, "model request failed; profile cooling down");
        if self.attempts > self.config.max_retries {
            self.finished = true;
            self.queue.push_back(Err(LlmError::Exhausted {
                attempts: self.attempts,
                last: Box::new(error),
            }));
            return;
        }
        let wait = match lock(&self.cooldowns).pick(now) {
            Some(Pick::Wait(_, d)) => d,
            _ => Duration::ZERO,
        };
        self.queue.push_back(Ok(ModelEvent::Retry {
            attempt: self.attempts + 1,
            error,
            discard: self.delivered_text,
            wait,
        }));
        self.delivered_text = false;
    }
}

impl Model for FailoverModel {
    fn name(&self) -> String {
        self.provider.name()
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let run = Run {
            provider: self.provider.clone(),
            profiles: self.profiles.clone(),
            cooldowns: self.cooldowns.clone(),
            clock: self.clock.clone(),
            config: self.config,
            ledger: self.ledger.clone(),
            request,
            attempt_usage: Usage::default(),
            attempts: 0,
            current: None,
            delivered_text: false,
            queue: VecDeque::new(),
            finished: false,
        };
        stream::unfold(run, |mut run| async move {
            let item = run.next().await?;
            Some((item, run))
        })
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn cooldown_doubles_to_a_cap() {
        let seq: Vec<u64> = (1..=9).map(|n| cooldown_for(n).as_secs()).collect();
        assert_eq!(seq, vec![1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(cooldown_for(u32::MAX), COOLDOWN_MAX);
    }

    #[test]
    fn picks_first_ready_then_waits_for_soonest() {
        let t0 = Instant::now();
        let mut c = Cooldowns::new(2);
        assert_eq!(c.pick(t0), Some(Pick::Ready(0)));
        assert_eq!(c.fail(0, t0, None), secs(1));
        assert_eq!(c.pick(t0), Some(Pick::Ready(1)));
        assert_eq!(c.fail(1, t0, Some(secs(5))), secs(5));
        assert_eq!(c.pick(t0), Some(Pick::Wait(0, secs(1))));
        assert_eq!(c.pick(t0 + secs(1)), Some(Pick::Ready(0)));
        assert_eq!(c.fail(0, t0 + secs(1), None), secs(2));
        c.succeed(0);
        assert_eq!(c.failures(0), 0);
        assert_eq!(c.pick(t0 + secs(1)), Some(Pick::Ready(0)));
        assert_eq!(Cooldowns::new(0).pick(t0), None);
    }

    #[test]
    fn profile_debug_redacts_key_and_normalises_url() {
        let p = Profile::new("k1", "http://h:1/v1/", Some("sk-secret".into()));
        assert_eq!(p.base_url, "http://h:1");
        assert!(!format!("{p:?}").contains("sk-secret"));
    }

    proptest! {
        #[test]
        fn cooldowns_stay_within_bounds(ops in proptest::collection::vec((0usize..3, any::<bool>(), 0u64..120), 1..60)) {
            let t0 = Instant::now();
            let mut c = Cooldowns::new(3);
            for (i, ok, ra) in ops {
                if ok {
                    c.succeed(i);
                } else {
                    let retry = (ra > 60).then(|| secs(ra));
                    let d = c.fail(i, t0, retry);
                    prop_assert!(d >= COOLDOWN_BASE);
                    prop_assert!(d <= COOLDOWN_MAX.max(retry.unwrap_or_default()));
                }
                match c.pick(t0) {
                    Some(Pick::Ready(_)) => {}
                    Some(Pick::Wait(_, d)) => prop_assert!(d <= secs(120)),
                    None => prop_assert!(false, "three profiles always give a pick"),
                }
            }
        }
    }
}
