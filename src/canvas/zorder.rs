//! Z-order: every shape carries a fractional `index` string; shapes paint in ascending string
//! order, so moving one shape to the front rewrites one key and concurrent reorders merge.
//!
//! Keys are the `fractional_index` crate's (hex strings whose string order equals their byte
//! order, ending in its terminator byte). Below the stack the crate's `new_before` is used; its
//! `new_between` is not (it can overflow on keys with a zero byte, and fronting/backing never
//! needs "between"). Above the stack the crate's `new_after` makes every key one step longer
//! per 127 shapes (the 7,000th shape drawn on top had a 110-character key, carried by every
//! update, ledger record and sort), so [`after`] counts instead: a key above the top is the
//! top's run of `ff` bytes followed by a length-prefixed counter, and grows by one byte per
//! factor of 256. Index strings written by foreign clients that do not parse are ignored when
//! computing new keys (they still sort by string). Owns nothing else.

use fractional_index::FractionalIndex;

/// The index of the first item in an empty list.
pub fn first_index() -> String {
    FractionalIndex::default().to_string()
}

fn parse(s: &str) -> Option<FractionalIndex> {
    FractionalIndex::from_string(s).ok()
}

/// Whether `s` is a key this module can place others around.
pub fn is_index(s: &str) -> bool {
    parse(s).is_some()
}

/// The crate's terminator, the last byte of every key.
const TERMINATOR: u8 = 0x80;
/// A counter's head byte is `COUNTER + n` for `n` digit bytes (1 ..= 126).
const COUNTER: u8 = 0x80;

/// A short key above `top`. The key's body (without the terminator) is read as a run of `ff`
/// bytes and the rest; the new key keeps the run and puts a counter after it: one more than the
/// rest when the rest is a counter (head `0x80 + n`, then `n` digits, big-endian), else the
/// smallest counter when the rest is empty. Any other rest (a key of the crate's or a foreign
/// client's) takes the crate's step, which keeps its length or shortens it; after at most 127
/// such steps the rest is empty and counting starts. Every counter key sorts above the key it
/// was made from: same prefix and length, larger number; or a larger head.
fn after(top: &FractionalIndex) -> FractionalIndex {
    let bytes = top.as_bytes();
    let body = &bytes[..bytes.len().saturating_sub(1)];
    let run = body.iter().take_while(|&&b| b == 0xff).count();
    let (prefix, rest) = body.split_at(run);
    let mut key = prefix.to_vec();
    match rest.split_first() {
        None => key.extend([COUNTER + 1, 0]),
        Some((&head, digits))
            if head > COUNTER && head < 0xff && digits.len() == usize::from(head - COUNTER) =>
        {
            match digits.iter().rposition(|&d| d < 0xff) {
                Some(i) => {
                    key.push(head);
                    key.extend_from_slice(&digits[..i]);
                    key.push(digits[i] + 1);
                    key.resize(key.len() + digits.len() - i - 1, 0);
                }
                // All digits are ff: one digit more (a 126-digit counter is never exhausted).
                None if head < 0xfe => {
                    key.push(head + 1);
                    key.resize(key.len() + digits.len() + 1, 0);
                }
                None => return FractionalIndex::new_after(top),
            }
        }
        Some(_) => return FractionalIndex::new_after(top),
    }
    key.push(TERMINATOR);
    match FractionalIndex::from_bytes(key) {
        Ok(next) if next > *top => next,
        _ => FractionalIndex::new_after(top),
    }
}

/// A key above every parseable key in `existing` (the top of the stack).
pub fn index_above<'a>(existing: impl IntoIterator<Item = &'a str>) -> String {
    match existing.into_iter().filter_map(parse).max() {
        Some(top) => after(&top).to_string(),
        None => first_index(),
    }
}

/// A key below every parseable key in `existing` (the bottom of the stack).
pub fn index_below<'a>(existing: impl IntoIterator<Item = &'a str>) -> String {
    match existing.into_iter().filter_map(parse).min() {
        Some(bottom) => FractionalIndex::new_before(&bottom).to_string(),
        None => first_index(),
    }
}

/// `n` ascending keys, all above `existing`.
pub fn indexes_above<'a>(existing: impl IntoIterator<Item = &'a str>, n: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(n);
    let mut top = existing.into_iter().filter_map(parse).max();
    for _ in 0..n {
        let next = match &top {
            Some(t) => after(t),
            None => FractionalIndex::default(),
        };
        out.push(next.to_string());
        top = Some(next);
    }
    out
}

/// `n` ascending keys, all below `existing`.
pub fn indexes_below<'a>(existing: impl IntoIterator<Item = &'a str>, n: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(n);
    let mut bottom = existing.into_iter().filter_map(parse).min();
    for _ in 0..n {
        let next = match &bottom {
            Some(b) => FractionalIndex::new_before(b),
            None => FractionalIndex::default(),
        };
        out.push(next.to_string());
        bottom = Some(next);
    }
    out.reverse();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn above_and_below_order_as_strings() {
        let a = first_index();
        let b = index_above([a.as_str()]);
        let c = index_below([a.as_str(), b.as_str()]);
        assert!(c < a && a < b, "{c} {a} {b}");
        let ups = indexes_above([b.as_str()], 3);
        assert!(ups.windows(2).all(|w| w[0] < w[1]) && ups[0] > b);
        let downs = indexes_below([c.as_str()], 3);
        assert!(downs.windows(2).all(|w| w[0] < w[1]) && downs[2] < c);
    }

    #[test]
    fn keys_on_top_grow_with_the_logarithm_of_the_stack() {
        let mut top = first_index();
        for n in 0..100_000 {
            let next = index_above([top.as_str()]);
            assert!(next > top, "{n}: {next} <= {top}");
            top = next;
        }
        // 100,000 keys: a head byte and three digits, plus the terminator.
        assert!(top.len() <= 10, "{top}");
        let batch = indexes_above([top.as_str()], 1000);
        assert!(batch.windows(2).all(|w| w[0] < w[1]) && batch[0] > top);
        assert!(batch.iter().all(|k| k.len() <= 10));
    }

    #[test]
    fn keys_above_the_crates_long_keys_stop_growing() {
        // What the crate's own step made of a long stack: a run of ff and one more byte.
        let mut top = "ffffffffffffa180".to_owned();
        let start_len = top.len();
        for n in 0..10_000 {
            let next = index_above([top.as_str()]);
            assert!(next > top, "{n}: {next} <= {top}");
            top = next;
        }
        assert!(top.len() <= start_len + 8, "{top}");
        // Foreign-looking bodies and the all-ff counter still go up.
        for key in ["8180", "81ff80", "81ffffff80", "7f80", "0080"] {
            if let Some(k) = parse(key) {
                assert!(after(&k) > k, "{key}");
            }
        }
    }

    #[test]
    fn garbage_keys_are_ignored_and_deep_stacks_work() {
        assert_eq!(index_above(["zz", ""]), first_index());
        let mut keys = vec![first_index()];
        for _ in 0..300 {
            let below = index_below(keys.iter().map(String::as_str));
            assert!(below < keys[0]);
            keys.insert(0, below);
        }
    }
}
