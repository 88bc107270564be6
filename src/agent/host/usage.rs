//! What fairies' model calls used and cost, per room, for `GET /rooms/{room}/usage`: totals
//! per fairy, per person (token `sub`) and per project over the last hour and the last day.
//!
//! Kept in memory in one-minute buckets per room (a day of them at most; older ones dropped
//! as new ones come, and once a minute those of every room, a room with none left forgotten),
//! so a room's totals cost a bounded amount whatever its traffic, and a room costs nothing a
//! day after its last call however many rooms come and go. Owns the
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
    book: Mutex<Book>,
}

#[derive(Debug, Default)]
struct Book {
    rooms: HashMap<RoomName, Minutes>,
    /// The minute of the last sweep of every room's expired minutes.
    swept: u64,
}

/// Drops the minutes of `minutes` a day old at `minute`.
fn expire(minutes: &mut Minutes, minute: u64) {
    while minutes
        .front()
        .is_some_and(|(m, _)| m + DAY_MINUTES <= minute)
    {
        minutes.pop_front();
    }
}

impl UsageBook {
    /// Records one call (or one attempt) of `key` in `room` at `now_ms` (Unix ms); `estimated`:
    /// its figures are an estimate.
    pub fn record(&self, room: &RoomName, key: &UsageKey, call: Recorded, now_ms: u64) {
        let minute = now_ms / MINUTE_MS;
        let t = Totals::of(&call.usage, call.cost, call.estimated);
        let mut book = self.book.lock().unwrap_or_else(|p| p.into_inner());
        // Once a minute, every room's old minutes: a room no call comes to any more (its fairies
        // dismissed, the room gone) is forgotten a day after its last call.
        if minute > book.swept {
            book.swept = minute;
            book.rooms.retain(|_, minutes| {
                expire(minutes, minute);
                !minutes.is_empty()
            });
        }
        let minutes = book.rooms.entry(room.clone()).or_default();
        expire(minutes, minute);
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
        let book = self.book.lock().unwrap_or_else(|p| p.into_inner());
        for (m, keys) in book.rooms.get(room).into_iter().flatten() {
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

    /// Rooms come and go (a soak moves its load to fresh rooms every two minutes): a room's
    /// minutes go a day after its last call, and the room with them, though no call comes to
    /// it again (they used to stay until the process ended).
    #[test]
    fn rooms_no_call_comes_to_are_forgotten_a_day_later() {
        let book = UsageBook::default();
        let fairy = FairyId::random();
        let key = UsageKey {
            fairy: fairy.clone(),
            person: Some("ann".into()),
            project: None,
        };
        let call = Recorded {
            usage: Usage {
                input_tokens: 10,
                output_tokens: 1,
                cache_read_input_tokens: 0,
                cache_creation_input_tokens: 0,
            },
            cost: None,
            estimated: false,
        };
        let t0 = 1_800_000_000_000;
        for i in 0..200u64 {
            let room = RoomName::parse(&format!("g{i}")).expect("room");
            book.record(&room, &key, call, t0 + i * 30_000);
        }
        let held = |book: &UsageBook| book.book.lock().map(|b| b.rooms.len()).unwrap_or(0);
        assert_eq!(held(&book), 200);
        let later = t0 + 200 * 30_000 + 24 * 3600 * 1000;
        let last = RoomName::parse("last").expect("room");
        book.record(&last, &key, call, later);
        assert_eq!(
            held(&book),
            1,
            "only the room with a call in the last day is kept"
        );
        assert_eq!(book.room(&last, later).day.total.calls, 1);
    }

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
