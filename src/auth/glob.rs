//! Room patterns of the `rooms` claim: exact names, or `*` globs such as `team-*`.
//!
//! Owns: the matching rule (a `*` matches any run of characters, possibly empty; every other
//! character matches itself; there is no escaping and no `?`). Must not decide what a valid
//! room name is (the server validates names before asking) nor anything about scopes.
//!
//! Matching is linear-time in practice (greedy with one backtrack point, as in shells), so a
//! hostile pattern like `*a*a*a*…b` cannot make it explode.

/// Whether `room` matches `pattern`, where `*` matches any (possibly empty) run of characters.
///
/// Works on chars, not bytes, so it never splits a UTF-8 sequence; never panics.
pub fn room_matches(pattern: &str, room: &str) -> bool {
    if !pattern.contains('*') {
        return pattern == room;
    }
    let pat: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = room.chars().collect();
    let (mut p, mut t) = (0usize, 0usize);
    // Position of the last `*` seen in the pattern, and where in the text it started matching.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match (pat.get(p), text.get(t)) {
            (Some('*'), _) => {
                star = Some((p, t));
                p += 1;
            }
            (Some(pc), Some(tc)) if pc == tc => {
                p += 1;
                t += 1;
            }
            _ => match star {
                // Let the last `*` swallow one more character and retry after it.
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    // The text is consumed: what is left of the pattern must be only stars.
    pat.get(p..)
        .is_some_and(|rest| rest.iter().all(|c| *c == '*'))
}

/// Whether `pattern` is acceptable in a minted token: 1–128 characters of the room-name
/// alphabet `[A-Za-z0-9._-]` plus `*`. Verification accepts any string (a pattern that can
/// match no valid room is harmless); minting is strict so operators see their typos.
pub fn is_valid_pattern(pattern: &str) -> bool {
    let len = pattern.chars().count();
    (1..=128).contains(&len)
        && pattern
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '*'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn exact_names_match_only_themselves() {
        assert!(room_matches("lobby", "lobby"));
        assert!(!room_matches("lobby", "lobby2"));
        assert!(!room_matches("lobby", "lobb"));
        assert!(!room_matches("lobby", ""));
    }

    #[test]
    fn star_globs() {
        assert!(room_matches("team-*", "team-a"));
        assert!(room_matches("team-*", "team-"));
        assert!(!room_matches("team-*", "team"));
        assert!(!room_matches("team-*", "xteam-a"));
        assert!(room_matches("*", "anything"));
        assert!(room_matches("*", ""));
        assert!(room_matches("*-draft", "plan-draft"));
        assert!(!room_matches("*-draft", "plan-drafts"));
        assert!(room_matches("a*b*c", "aXXbYYc"));
        assert!(room_matches("a*b*c", "abc"));
        assert!(!room_matches("a*b*c", "aXXbYY"));
        assert!(room_matches("**", "x"));
    }

    #[test]
    fn hostile_pattern_finishes() {
        let pattern = format!("{}b", "*a".repeat(64));
        let room = "a".repeat(128);
        assert!(!room_matches(&pattern, &room));
    }

    #[test]
    fn unicode_does_not_split() {
        assert!(room_matches("é*", "été"));
        assert!(!room_matches("é*", "e"));
    }

    #[test]
    fn pattern_validation() {
        assert!(is_valid_pattern("team-*"));
        assert!(is_valid_pattern("*"));
        assert!(is_valid_pattern("a.b_c-1"));
        assert!(!is_valid_pattern(""));
        assert!(!is_valid_pattern("team a"));
        assert!(!is_valid_pattern("a/b"));
        assert!(!is_valid_pattern(&"a".repeat(129)));
    }

    fn room_name() -> impl Strategy<Value = String> {
        "[A-Za-z0-9._-]{1,24}"
    }

    proptest! {
        #[test]
        fn pattern_without_star_matches_only_itself(pattern in "[A-Za-z0-9._-]{1,16}", room in room_name()) {
            prop_assert_eq!(room_matches(&pattern, &room), pattern == room);
            prop_assert!(room_matches(&pattern, &pattern));
        }

        #[test]
        fn prefix_star_matches_exactly_the_prefixed(prefix in "[A-Za-z0-9._-]{0,8}", room in "[a-c-]{0,12}") {
            let pattern = format!("{prefix}*");
            prop_assert_eq!(room_matches(&pattern, &room), room.starts_with(&prefix));
            let prefixed = format!("{prefix}{room}");
            prop_assert!(room_matches(&pattern, &prefixed));
        }

        #[test]
        fn star_suffix_matches_exactly_the_suffixed(suffix in "[a-c-]{0,6}", room in "[a-c-]{0,12}") {
            let pattern = format!("*{suffix}");
            prop_assert_eq!(room_matches(&pattern, &room), room.ends_with(&suffix));
        }

        #[test]
        fn lone_star_matches_everything(room in any::<String>()) {
            prop_assert!(room_matches("*", &room));
        }

        #[test]
        fn matching_agrees_with_a_reference_and_never_panics(pattern in "[ab*]{0,8}", room in "[ab]{0,10}") {
            prop_assert_eq!(room_matches(&pattern, &room), reference(&pattern, &room));
        }

        #[test]
        fn arbitrary_strings_never_panic(pattern in any::<String>(), room in any::<String>()) {
            let _ = room_matches(&pattern, &room);
            let _ = is_valid_pattern(&pattern);
        }
    }

    /// Obviously-correct exponential reference matcher for small inputs.
    fn reference(pattern: &str, room: &str) -> bool {
        fn go(p: &[char], t: &[char]) -> bool {
            match p.split_first() {
                None => t.is_empty(),
                Some(('*', rest)) => (0..=t.len()).any(|i| go(rest, &t[i..])),
                Some((c, rest)) => t.first() == Some(c) && go(rest, &t[1..]),
            }
        }
        let p: Vec<char> = pattern.chars().collect();
        let t: Vec<char> = room.chars().collect();
        go(&p, &t)
    }
}
