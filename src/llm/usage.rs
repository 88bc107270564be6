//! Token usage: what one call cost and what all calls of a model cost together.
//!
//! Owns: the [`Usage`] record carried by stream events and the [`UsageLedger`] that sums calls.
//! Input and output tokens add up across calls; cache figures describe one call only (a cache
//! read on every turn of a conversation is the same cached prefix, not new tokens), so the
//! ledger keeps them in the last call's record and never sums them. No I/O.

use serde::{Deserialize, Serialize};

/// The usage of one model call. Providers report it cumulatively while streaming, so a later
/// [`Usage`] for the same call replaces an earlier one (see [`Usage::merge_from`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens billed at the normal rate (excluding cache reads and writes).
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Prompt tokens read from the provider's prompt cache.
    pub cache_read_input_tokens: u64,
    /// Prompt tokens written to the provider's prompt cache.
    pub cache_creation_input_tokens: u64,
}

impl Usage {
    /// Takes every field that `later` reports (non-zero), keeping the rest: Anthropic's
    /// `message_delta` carries the cumulative output count and may omit the input counts.
    pub fn merge_from(&mut self, later: &Usage) {
        let take = |mine: &mut u64, theirs: u64| {
            if theirs != 0 {
                *mine = theirs;
            }
        };
        take(&mut self.input_tokens, later.input_tokens);
        take(&mut self.output_tokens, later.output_tokens);
        take(
            &mut self.cache_read_input_tokens,
            later.cache_read_input_tokens,
        );
        take(
            &mut self.cache_creation_input_tokens,
            later.cache_creation_input_tokens,
        );
    }
}

/// Characters per token assumed when a cut stream's usage is estimated (JSON and English run
/// at 3 to 4; the lower figure errs on the side of counting more).
pub const ESTIMATE_CHARS_PER_TOKEN: u64 = 3;

impl Usage {
    /// The usage of an attempt whose stream was dropped before the provider's final report
    /// (OpenAI-compatible providers send all of it in the last chunk, Anthropic the output
    /// count in `message_delta`): what was reported, raised to an estimate from the characters
    /// of the prompt's text (only when no input was reported at all) and of the answer
    /// received. A budget must not read a cut stream as free.
    pub fn estimated_after_cut(&self, prompt_chars: usize, answer_chars: usize) -> Usage {
        let tokens = |chars: usize| (chars as u64).div_ceil(ESTIMATE_CHARS_PER_TOKEN);
        let reported_input =
            self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens;
        Usage {
            input_tokens: if reported_input == 0 {
                tokens(prompt_chars)
            } else {
                self.input_tokens
            },
            output_tokens: self.output_tokens.max(tokens(answer_chars)),
            ..*self
        }
    }

    /// What an attempt its caller dropped before its stream ended is counted as: what was
    /// reported when it had delivered nothing yet (no text, no usage: a request cancelled while
    /// the prompt was read), else [`Usage::estimated_after_cut`]. The one rule for the fairy's
    /// `usage` event and for the budgets and `GET /rooms/{room}/usage`.
    pub fn counted_after_drop(&self, prompt_chars: usize, answer_chars: usize) -> Usage {
        if answer_chars == 0 && *self == Usage::default() {
            return *self;
        }
        self.estimated_after_cut(prompt_chars, answer_chars)
    }

    /// A call's usage once one more attempt ended: `self` (its earlier attempts) plus `last`,
    /// input and output summed; the cache figures are the last attempt's.
    pub fn with_attempt(&self, last: &Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens + last.input_tokens,
            output_tokens: self.output_tokens + last.output_tokens,
            ..*last
        }
    }
}

/// Usage across the calls of one model (or one fairy): totals of input and output, and the
/// last call's full record, cache figures included.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageLedger {
    /// Calls recorded.
    pub calls: u64,
    /// Sum of `input_tokens` over all calls.
    pub total_input_tokens: u64,
    /// Sum of `output_tokens` over all calls.
    pub total_output_tokens: u64,
    /// The most recent call's usage (the only place cache figures live).
    pub last: Option<Usage>,
}

impl UsageLedger {
    /// Records the final usage of one finished call.
    pub fn record(&mut self, call: Usage) {
        self.calls = self.calls.saturating_add(1);
        self.total_input_tokens = self.total_input_tokens.saturating_add(call.input_tokens);
        self.total_output_tokens = self.total_output_tokens.saturating_add(call.output_tokens);
        self.last = Some(call);
    }

    /// Input plus output tokens over all calls.
    pub fn total_tokens(&self) -> u64 {
        self.total_input_tokens
            .saturating_add(self.total_output_tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_attempt_adds_input_and_output_and_brings_its_cache_figures() {
        let earlier = Usage {
            input_tokens: 100,
            output_tokens: 10,
            cache_read_input_tokens: 5,
            cache_creation_input_tokens: 6,
        };
        let last = Usage {
            input_tokens: 200,
            output_tokens: 20,
            cache_read_input_tokens: 50,
            cache_creation_input_tokens: 0,
        };
        assert_eq!(
            earlier.with_attempt(&last),
            Usage {
                input_tokens: 300,
                output_tokens: 30,
                cache_read_input_tokens: 50,
                cache_creation_input_tokens: 0,
            }
        );
    }

    #[test]
    fn a_cut_stream_is_estimated_where_the_report_is_missing_or_short() {
        // OpenAI-compatible: nothing reported before the last chunk.
        let none = Usage::default().estimated_after_cut(3000, 301);
        assert_eq!((none.input_tokens, none.output_tokens), (1000, 101));
        // Anthropic: input from `message_start`, output 1 until `message_delta`.
        let started = Usage {
            input_tokens: 10,
            output_tokens: 1,
            cache_read_input_tokens: 500,
            cache_creation_input_tokens: 0,
        };
        let cut = started.estimated_after_cut(3000, 30);
        assert_eq!(
            cut,
            Usage {
                output_tokens: 10,
                ..started
            }
        );
        // A report larger than the estimate stands.
        let big = Usage {
            input_tokens: 7,
            output_tokens: 99,
            ..Usage::default()
        };
        assert_eq!(big.estimated_after_cut(3000, 30), big);
        // Dropped before anything arrived: nothing to count; anything at all: the estimate.
        assert_eq!(
            Usage::default().counted_after_drop(3000, 0),
            Usage::default()
        );
        assert_eq!(
            Usage::default().counted_after_drop(3000, 1).input_tokens,
            1000
        );
        assert_eq!(started.counted_after_drop(3000, 0), started);
    }

    #[test]
    fn cache_figures_are_not_summed() {
        let mut l = UsageLedger::default();
        let call = Usage {
            input_tokens: 10,
            output_tokens: 5,
            cache_read_input_tokens: 1000,
            cache_creation_input_tokens: 0,
        };
        l.record(call);
        l.record(call);
        assert_eq!(l.total_input_tokens, 20);
        assert_eq!(l.total_output_tokens, 10);
        assert_eq!(l.total_tokens(), 30);
        assert_eq!(l.last.map(|u| u.cache_read_input_tokens), Some(1000));
    }

    #[test]
    fn merge_keeps_what_a_delta_omits() {
        let mut u = Usage {
            input_tokens: 100,
            output_tokens: 1,
            cache_read_input_tokens: 7,
            cache_creation_input_tokens: 3,
        };
        u.merge_from(&Usage {
            output_tokens: 42,
            ..Usage::default()
        });
        assert_eq!(
            (u.input_tokens, u.output_tokens, u.cache_read_input_tokens),
            (100, 42, 7)
        );
    }

    proptest! {
        #[test]
        fn totals_are_sums(calls in proptest::collection::vec((0u64..1_000_000, 0u64..1_000_000), 0..20)) {
            let mut l = UsageLedger::default();
            for (i, o) in &calls {
                l.record(Usage { input_tokens: *i, output_tokens: *o, ..Usage::default() });
            }
            prop_assert_eq!(l.calls, calls.len() as u64);
            prop_assert_eq!(l.total_input_tokens, calls.iter().map(|c| c.0).sum::<u64>());
            prop_assert_eq!(l.total_output_tokens, calls.iter().map(|c| c.1).sum::<u64>());
        }
    }
}
