//! Z-order: every shape carries a fractional `index` string; shapes paint in ascending string
//! order, so moving one shape to the front rewrites one key and concurrent reorders merge.
//!
//! Keys come from the `fractional_index` crate (hex strings whose string order equals their
//! byte order). Only `new_before` / `new_after` are used: the crate's `new_between` can
//! overflow on keys with a zero byte, and fronting/backing never needs "between". Index strings
//! written by foreign clients that do not parse are ignored when computing new keys (they
//! still sort by string). Owns nothing else.

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

/// A key above every parseable key in `existing` (the top of the stack).
pub fn index_above<'a>(existing: impl IntoIterator<Item = &'a str>) -> String {
    match existing.into_iter().filter_map(parse).max() {
        Some(top) => FractionalIndex::new_after(&top).to_string(),
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
            Some(t) => FractionalIndex::new_after(t),
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
