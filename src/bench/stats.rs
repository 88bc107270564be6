//! Latency statistics of `fairyring bench`: a fixed-size log-linear histogram of microseconds
//! (exact below 128 µs, then 64 sub-buckets per power of two: under 1.6 % error), so that
//! millions of deliveries cost a few kilobytes, and shards of it that the clients record into
//! without contending on one lock. Knows nothing about sockets or documents.

use std::sync::{Mutex, MutexGuard};

/// Values below this are counted exactly.
const LINEAR: u64 = 128;
/// Sub-buckets per power of two above [`LINEAR`].
const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;
/// Powers of two covered above [`LINEAR`] (up to 2^40 µs, about 12 days; larger values clamp).
const OCTAVES: u64 = 40 - 7;
const BUCKETS: usize = (LINEAR + OCTAVES * SUB) as usize;

/// A histogram of latencies in microseconds.
#[derive(Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            total: 0,
            max: 0,
        }
    }
}

fn bucket_of(value: u64) -> usize {
    if value < LINEAR {
        return value as usize;
    }
    // value >= 128, so its highest set bit is at least 7.
    let exp = 63 - u64::from(value.leading_zeros());
    let octave = (exp - 7).min(OCTAVES - 1);
    let exp = octave + 7;
    let sub = (value >> (exp - u64::from(SUB_BITS))) & (SUB - 1);
    let sub = if value >> exp > 1 { SUB - 1 } else { sub };
    (LINEAR + octave * SUB + sub) as usize
}

/// The smallest value that falls in bucket `index`.
fn bucket_floor(index: usize) -> u64 {
    let index = index as u64;
    if index < LINEAR {
        return index;
    }
    let octave = (index - LINEAR) / SUB;
    let sub = (index - LINEAR) % SUB;
    let exp = octave + 7;
    (1u64 << exp) + (sub << (exp - u64::from(SUB_BITS)))
}

impl Histogram {
    /// Counts one value.
    pub fn record(&mut self, micros: u64) {
        if let Some(count) = self.counts.get_mut(bucket_of(micros)) {
            *count += 1;
        }
        self.total += 1;
        self.max = self.max.max(micros);
    }

    /// Adds another histogram's counts to this one.
    pub fn merge(&mut self, other: &Histogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.total += other.total;
        self.max = self.max.max(other.max);
    }

    /// The histogram as JSON (the non-empty buckets only), for a client process to send its
    /// counts to the coordinator (`--client-procs`).
    pub fn to_json(&self) -> serde_json::Value {
        let buckets: Vec<[u64; 2]> = self
            .counts
            .iter()
            .enumerate()
            .filter(|(_, count)| **count > 0)
            .map(|(index, count)| [index as u64, *count])
            .collect();
        serde_json::json!({ "total": self.total, "max": self.max, "buckets": buckets })
    }

    /// A histogram read back from [`Histogram::to_json`]; `None` when it is not one.
    pub fn from_json(value: &serde_json::Value) -> Option<Histogram> {
        let mut histogram = Histogram {
            total: value.get("total")?.as_u64()?,
            max: value.get("max")?.as_u64()?,
            ..Histogram::default()
        };
        for bucket in value.get("buckets")?.as_array()? {
            let index = usize::try_from(bucket.get(0)?.as_u64()?).ok()?;
            *histogram.counts.get_mut(index)? += bucket.get(1)?.as_u64()?;
        }
        Some(histogram)
    }

    /// Number of values counted.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// The largest value counted (exact).
    #[cfg(test)]
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The value at quantile `q` (0.0..=1.0), as the floor of its bucket (the exact maximum for
    /// q = 1); `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        if q >= 1.0 {
            return Some(self.max);
        }
        // The rank of the value (1-based) at quantile q, as "nearest rank".
        let rank = ((q.max(0.0) * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (index, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Some(bucket_floor(index).min(self.max));
            }
        }
        Some(self.max)
    }
}

/// Histograms the clients record into, one lock per shard so that threads rarely meet.
pub struct Shards {
    shards: Vec<Mutex<Histogram>>,
}

impl Shards {
    /// `count` empty shards (at least one).
    pub fn new(count: usize) -> Self {
        Shards {
            shards: (0..count.max(1))
                .map(|_| Mutex::new(Histogram::default()))
                .collect(),
        }
    }

    /// The shard client `client` records into.
    pub fn shard(&self, client: usize) -> MutexGuard<'_, Histogram> {
        let index = client % self.shards.len();
        // `new` made at least one shard, so the index is in range.
        self.shards[index].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every shard merged into one histogram, the shards left empty (one interval's worth).
    pub fn take(&self) -> Histogram {
        let mut all = Histogram::default();
        for shard in &self.shards {
            let mut shard = shard.lock().unwrap_or_else(|p| p.into_inner());
            all.merge(&std::mem::take(&mut *shard));
        }
        all
    }

    /// Adds `other`'s counts (another process's) to the first shard.
    pub fn absorb(&self, other: &Histogram) {
        self.shard(0).merge(other);
    }

    /// Every shard merged into one histogram.
    pub fn merged(&self) -> Histogram {
        let mut all = Histogram::default();
        for shard in &self.shards {
            all.merge(&shard.lock().unwrap_or_else(|p| p.into_inner()));
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_values_are_exact() {
        let mut h = Histogram::default();
        for v in 0..100 {
            h.record(v);
        }
        assert_eq!(h.count(), 100);
        assert_eq!(h.quantile(0.5), Some(49));
        assert_eq!(h.quantile(0.99), Some(98));
        assert_eq!(h.quantile(1.0), Some(99));
        assert_eq!(h.quantile(0.0), Some(0));
    }

    #[test]
    fn large_values_are_within_two_percent() {
        for v in [128u64, 129, 1000, 4095, 4096, 123_456, 9_999_999, 1 << 39] {
            let floor = bucket_floor(bucket_of(v));
            assert!(floor <= v, "{v}: floor {floor}");
            assert!((v - floor) as f64 <= v as f64 * 0.016, "{v}: floor {floor}");
        }
        // Buckets are monotonic and contiguous.
        let mut last = 0;
        for v in (0..2_000_000u64).step_by(7) {
            let b = bucket_of(v);
            assert!(b >= last);
            last = b;
        }
    }

    #[test]
    fn huge_values_clamp_into_the_last_bucket() {
        let mut h = Histogram::default();
        h.record(u64::MAX);
        assert_eq!(h.count(), 1);
        assert_eq!(h.quantile(0.5), Some(bucket_floor(BUCKETS - 1)));
        assert_eq!(h.max(), u64::MAX);
    }

    #[test]
    fn percentiles_of_a_spread() {
        let mut h = Histogram::default();
        // 990 fast deliveries at 1 ms and 10 slow ones at 40 ms: p99 is the fast edge.
        for _ in 0..990 {
            h.record(1_000);
        }
        for _ in 0..10 {
            h.record(40_000);
        }
        let p50 = h.quantile(0.5).unwrap_or(0);
        assert!((984..=1_000).contains(&p50), "{p50}");
        assert!(h.quantile(0.99).unwrap_or(0) <= 1_000);
        assert!(h.quantile(0.995).unwrap_or(0) >= 39_000);
        assert_eq!(h.quantile(1.0), Some(40_000));
        assert_eq!(Histogram::default().quantile(0.5), None);
    }

    #[test]
    fn a_histogram_survives_json() {
        let mut h = Histogram::default();
        for v in [3u64, 3, 500, 70_000, 1 << 35] {
            h.record(v);
        }
        let back = Histogram::from_json(&h.to_json()).expect("a histogram");
        assert_eq!(back.count(), 5);
        assert_eq!(back.max(), 1 << 35);
        for q in [0.1, 0.5, 0.9, 0.99] {
            assert_eq!(back.quantile(q), h.quantile(q));
        }
        let shards = Shards::new(2);
        shards.absorb(&back);
        shards.absorb(&back);
        assert_eq!(shards.merged().count(), 10);
        assert!(Histogram::from_json(&serde_json::json!({"total": 1})).is_none());
        assert!(
            Histogram::from_json(
                &serde_json::json!({"total": 1, "max": 1, "buckets": [[99999, 1]]})
            )
            .is_none(),
            "a bucket out of range"
        );
    }

    #[test]
    fn shards_merge() {
        let shards = Shards::new(4);
        for client in 0..10 {
            shards.shard(client).record(client as u64);
        }
        let all = shards.merged();
        assert_eq!(all.count(), 10);
        assert_eq!(all.max(), 9);
    }
}
