//! What fairies' model calls used and cost, per room, for `GET /rooms/{room}/usage`: totals
//! per fairy, per person (token `sub`) and per project over the last hour and the last day.
//!
//! Kept in memory in one-minute buckets per room (a day of them at most; older ones dropped
//! as new ones come), so a room's totals cost a bounded amount whatever its traffic. Owns the
//! book; [`crate::agent::host::budget`] records into it, the HTTP edge reads it. Must not
//! touch documents or the store (the totals of this node since it started).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;

use serde::Serialize;

use crate::ids::{FairyId, RoomName};
use crate::llm::Usage;

/// One minute, in milliseconds.
const MINUTE_MS: u64 = 60_000;
/// Minutes a room's book keeps.
const DAY_MINUTES: u64 = 24 * 60;
/// Distinct (fairy, person, project) keys one minute of one room keeps: past it, a call is
/// counted under its fairy alone.
const MAX_KEYS_PER_MINUTE: usize = 256;

/// Who a call is recorded under.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UsageKey {
    /// The fairy that made it.
    pub fairy: FairyId,
    /// The person whose request it served.
    pub person: Option<String>,
    /// The project it served.
    pub project: Option<String>,
}

/// Tokens and money over some calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    /// Model calls.
    pub calls: u64,
    /// Uncached input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the provider's cache.
    pub cache_read_input_tokens: u64,
    /// Input tokens written to the provider's cache.
    pub cache_creation_input_tokens: u64,
    /// US dollars, for the calls whose model has a price (`--llm-prices`).
    pub cost_usd: f64,
    /// Calls of a model without a price (their tokens are counted, not their cost).
    pub unpriced_calls: u64,
    /// Calls (attempts) whose figures are an estimate: the stream was dropped before the
    /// provider's final usage report, so its tokens were counted from the characters sent and
    /// received (docs/llm.md "Models that misbehave").
    pub estimated_calls: u64,
}

impl Totals {
    fn add(&mut self, other: &Totals) {
        self.calls += other.calls;
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_input_tokens += other.cache_read_input_tokens;
        self.cache_creation_input_tokens += other.cache_creation_input_tokens;
        self.cost_usd += other.cost_usd;
        self.unpriced_calls += other.unpriced_calls;
        self.estimated_calls += other.estimated_calls;
    }

    fn of(usage: &Usage, cost: Option<f64>, estimated: bool) -> Totals {
        Totals {
            calls: 1,
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cache_read_input_tokens: usage.cache_read_input_tokens,
            cache_creation_input_tokens: usage.cache_creation_input_tokens,
            cost_usd: cost.unwrap_or(0.0),
            unpriced_calls: u64::from(cost.is_none()),
            estimated_calls: u64::from(estimated),
        }
    }
}

/// A room's totals over one window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct WindowTotals {
    /// Every call.
    pub total: Totals,
    /// Per fairy id.
    pub fairies: BTreeMap<String, Totals>,
    /// Per person (token `sub`).
    pub people: BTreeMap<String, Totals>,
    /// Per project id.
    pub projects: BTreeMap<String, Totals>,
}

impl WindowTotals {
    fn add(&mut self, key: &UsageKey, t: &Totals) {
        self.total.add(t);
        self.fairies
            .entry(key.fairy.as_str().to_owned())
            .or_default()
            .add(t);
        if let Some(p) = &key.person {
            self.people.entry(p.clone()).or_default().add(t);
        }
        if let Some(p) = &key.project {
            self.projects.entry(p.clone()).or_default().add(t);
        }
    }
}

/// A room's usage over the last hour and the last day.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct RoomUsage {
    /// The last 60 minutes.
    pub hour: WindowTotals,
    /// The last 24 hours.
    pub day: WindowTotals,
}

/// One call (or attempt) as the book records it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recorded {
    /// What it used.
    pub usage: Usage,
    /// What that cost in US dollars, when its model has a price.
    pub cost: Option<f64>,
    /// Whether `usage` is an estimate.
    pub estimated: bool,
}

/// One room's minutes, oldest first.
type Minutes = VecDeque<(u64, HashMap<UsageKey, Totals>)>;

/// Every room's usage, by minute.
#[derive(Debug, Default)]
pub struct UsageBook {
    rooms: Mutex<HashMap<RoomName, Minutes>>,
}

impl UsageBook {
    /// Records one call (or one attempt) of `key` in `room` at `now_ms` (Unix ms); `estimated`:
    /// its figures are an estimate.
    pub fn record(&self, room: &RoomName, key: &UsageKey, call: Recorded, now_ms: u64) {
        let minute = now_ms / MINUTE_MS;
        let t = Totals::of(&call.usage, call.cost, call.estimated);
        let mut rooms = self.rooms.lock().unwrap_or_else(|p| p.into_inner());
        let minutes = rooms.entry(room.clone()).or_default();
        while minutes
            .front()
            .is_some_and(|(m, _)| m + DAY_MINUTES <= minute)
        {
            minutes.pop_front();
        }
        if minutes.back().is_none_or(|(m, _)| *m < minute) {
            minutes.push_back((minute, HashMap::new()));
        }
        let Some((_, keys)) = minutes.back_mut() else {
            return;
        };
        let key = if keys.len() >= MAX_KEYS_PER_MINUTE && !keys.contains_key(key) {
            UsageKey {
                fairy: key.fairy.clone(),
                person: None,
                project: None,
            }
        } else {
            key.clone()
        };
        keys.entry(key).or_default().add(&t);
    }

    /// `room`'s totals over the hour and the day before `now_ms`.
    pub fn room(&self, room: &RoomName, now_ms: u64) -> RoomUsage {
        let minute = now_ms / MINUTE_MS;
        let mut out = RoomUsage::default();
        let rooms = self.rooms.lock().unwrap_or_else(|p| p.into_inner());
        for (m, keys) in rooms.get(room).into_iter().flatten() {
            let age = minute.saturating_sub(*m);
            if age >= DAY_MINUTES {
                continue;
            }
            for (key, t) in keys {
                out.day.add(key, t);
                if age < 60 {
                    out.hour.add(key, t);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_per_fairy_person_and_project_over_the_hour_and_the_day() {
        let book = UsageBook::default();
        let room = RoomName::parse("usage").expect("room");
        let (f1, f2) = (FairyId::random(), FairyId::random());
        let key = |f: &FairyId, person: Option<&str>, project: Option<&str>| UsageKey {
            fairy: f.clone(),
            person: person.map(str::to_owned),
            project: project.map(str::to_owned),
        };
        let used = Usage {
            input_tokens: 100,
            output_tokens: 10,
            cache_read_input_tokens: 1000,
            cache_creation_input_tokens: 5,
        };
        let t0 = 1_800_000_000_000;
        let call = |cost: Option<f64>, estimated: bool| Recorded {
            usage: used,
            cost,
            estimated,
        };
        // Two hours ago: in the day, not the hour.
        book.record(
            &room,
            &key(&f1, Some("ann"), None),
            call(Some(0.5), true),
            t0,
        );
        let now = t0 + 2 * 3600 * 1000;
        book.record(
            &room,
            &key(&f1, Some("ann"), None),
            call(Some(0.25), false),
            now,
        );
        book.record(
            &room,
            &key(&f2, Some("bob"), Some("p-1")),
            call(None, true),
            now,
        );
        let u = book.room(&room, now);
        assert_eq!(u.day.total.calls, 3);
        assert_eq!(u.hour.total.calls, 2);
        assert_eq!(u.day.people["ann"].input_tokens, 200);
        assert!((u.day.people["ann"].cost_usd - 0.75).abs() < 1e-12);
        assert_eq!(u.hour.people["ann"].calls, 1);
        assert_eq!(u.hour.projects["p-1"].unpriced_calls, 1);
        assert_eq!(u.hour.fairies[f2.as_str()].cache_read_input_tokens, 1000);
        assert_eq!(u.hour.fairies.len(), 2);
        assert_eq!(u.day.total.estimated_calls, 2);
        assert_eq!(u.hour.people["ann"].estimated_calls, 0);
        assert_eq!(u.hour.people["bob"].estimated_calls, 1);
        // A day later the first call is gone, and another room has nothing.
        let later = t0 + 24 * 3600 * 1000;
        assert_eq!(book.room(&room, later).day.total.calls, 2);
        let other = RoomName::parse("other").expect("room");
        assert_eq!(book.room(&other, now), RoomUsage::default());
    }
}
