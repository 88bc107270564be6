//! Model prices (docs/llm.md "Prices", `--llm-prices FILE`): US dollars per million tokens of
//! uncached input, cached input (cache reads), cache writes and output, per model, and the
//! cost of a call's [`Usage`]. Defaults for the providers' models we name are built in
//! ([`DEFAULT_PRICES`]); a file adds models or replaces their prices. A model without a price
//! (a local one) has no money figure; its tokens are still counted.
//!
//! Owns the table and the arithmetic; reads a file only in [`Prices::load`]. Must not know
//! who spends (that is [`crate::agent::host`]'s).

use std::collections::BTreeMap;
use std::path::Path;

use super::usage::Usage;

/// The built-in prices (USD per million tokens, the providers' list prices in November 2026),
/// in the format `--llm-prices` reads. A model name matches the longest key it starts with
/// (`claude-sonnet-4-5-20250929` is `claude-sonnet-4-5`), after any `provider:` prefix.
pub const DEFAULT_PRICES: &str = r#"# USD per million tokens: input (uncached), cached_input (cache reads), cache_write
# (5-minute cache), cache_write_1h (1-hour cache, --llm-cache-ttl 1h), output.
[models."claude-opus-4-5"]
input = 5.0
cached_input = 0.5
cache_write = 6.25
cache_write_1h = 10.0
output = 25.0

[models."claude-opus-4"]
input = 15.0
cached_input = 1.5
cache_write = 18.75
cache_write_1h = 30.0
output = 75.0

[models."claude-sonnet-4"]
input = 3.0
cached_input = 0.3
cache_write = 3.75
cache_write_1h = 6.0
output = 15.0

[models."claude-3-7-sonnet"]
input = 3.0
cached_input = 0.3
cache_write = 3.75
cache_write_1h = 6.0
output = 15.0

[models."claude-haiku-4-5"]
input = 1.0
cached_input = 0.1
cache_write = 1.25
cache_write_1h = 2.0
output = 5.0

[models."claude-3-5-haiku"]
input = 0.8
cached_input = 0.08
cache_write = 1.0
cache_write_1h = 1.6
output = 4.0

[models."gpt-5"]
input = 1.25
cached_input = 0.125
output = 10.0

[models."gpt-5-mini"]
input = 0.25
cached_input = 0.025
output = 2.0

[models."gpt-5-nano"]
input = 0.05
cached_input = 0.005
output = 0.4

[models."gpt-4.1"]
input = 2.0
cached_input = 0.5
output = 8.0

[models."gpt-4.1-mini"]
input = 0.4
cached_input = 0.1
output = 1.6

[models."gpt-4.1-nano"]
input = 0.1
cached_input = 0.025
output = 0.4

[models."gpt-4o"]
input = 2.5
cached_input = 1.25
output = 10.0

[models."gpt-4o-mini"]
input = 0.15
cached_input = 0.075
output = 0.6

[models."o3"]
input = 2.0
cached_input = 0.5
output = 8.0

[models."o4-mini"]
input = 1.1
cached_input = 0.275
output = 4.4
"#;

/// One model's prices, USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    /// Uncached input.
    pub input: f64,
    /// Input read from the prompt cache (defaults to `input`).
    pub cached_input: f64,
    /// Input written to a 5-minute cache (defaults to `input`: providers that do not bill
    /// writes apart).
    pub cache_write: f64,
    /// Input written to a 1-hour cache (defaults to `cache_write`).
    pub cache_write_1h: f64,
    /// Output.
    pub output: f64,
}

/// Why a prices file was refused.
#[derive(Debug, thiserror::Error)]
pub enum PricesError {
    /// The file could not be read.
    #[error("cannot read prices {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// Not TOML.
    #[error("prices are not valid TOML: {0}")]
    Syntax(String),
    /// A model's entry is missing a price or has one that is not a non-negative number.
    #[error("prices of model `{model}`: {problem}")]
    Entry {
        /// The model key.
        model: String,
        /// What is wrong.
        problem: String,
    },
}

/// The price table: model name prefixes and their prices.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Prices {
    models: BTreeMap<String, Price>,
}

impl Prices {
    /// The built-in table ([`DEFAULT_PRICES`]).
    pub fn defaults() -> Self {
        Self::parse(DEFAULT_PRICES).unwrap_or_default()
    }

    /// The built-in table with the entries of the TOML file at `path` added (a model it names
    /// gets its prices).
    pub fn load(path: &Path) -> Result<Self, PricesError> {
        let text = std::fs::read_to_string(path).map_err(|source| PricesError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let mut prices = Self::defaults();
        prices.models.extend(Self::parse(&text)?.models);
        Ok(prices)
    }

    /// A table from TOML text: a `[models."NAME"]` table per model with `input` and `output`
    /// (and optionally `cached_input`, `cache_write`, `cache_write_1h`), USD per million
    /// tokens.
    pub fn parse(text: &str) -> Result<Self, PricesError> {
        let doc: toml_edit::Document<String> = toml_edit::Document::parse(text.to_owned())
            .map_err(|e| PricesError::Syntax(e.to_string()))?;
        let mut models = BTreeMap::new();
        let Some(table) = doc.get("models") else {
            return Ok(Prices { models });
        };
        let table = table.as_table_like().ok_or_else(|| PricesError::Entry {
            model: "models".into(),
            problem: "must be a table".into(),
        })?;
        for (name, entry) in table.iter() {
            let problem = |problem: &str| PricesError::Entry {
                model: name.to_owned(),
                problem: problem.to_owned(),
            };
            let entry = entry
                .as_table_like()
                .ok_or_else(|| problem("must be a table"))?;
            let field = |key: &str| -> Result<Option<f64>, PricesError> {
                let Some(item) = entry.get(key) else {
                    return Ok(None);
                };
                let v = item
                    .as_float()
                    .or_else(|| item.as_integer().map(|i| i as f64))
                    .ok_or_else(|| problem(&format!("`{key}` is not a number")))?;
                if v.is_finite() && v >= 0.0 {
                    Ok(Some(v))
                } else {
                    Err(problem(&format!("`{key}` is negative or not finite")))
                }
            };
            let input = field("input")?.ok_or_else(|| problem("`input` is missing"))?;
            let output = field("output")?.ok_or_else(|| problem("`output` is missing"))?;
            let cache_write = field("cache_write")?.unwrap_or(input);
            models.insert(
                name.to_owned(),
                Price {
                    input,
                    cached_input: field("cached_input")?.unwrap_or(input),
                    cache_write,
                    cache_write_1h: field("cache_write_1h")?.unwrap_or(cache_write),
                    output,
                },
            );
        }
        Ok(Prices { models })
    }

    /// The price of `model` (`provider:name` or `name`): the longest key it starts with.
    pub fn price(&self, model: &str) -> Option<&Price> {
        let name = model.split_once(':').map_or(model, |(_, n)| n);
        let name = name.rsplit('/').next().unwrap_or(name);
        self.models
            .iter()
            .filter(|(key, _)| name.starts_with(key.as_str()))
            .max_by_key(|(key, _)| key.len())
            .map(|(_, p)| p)
    }

    /// What `usage` cost on `model`, in USD (`None`: no price for it); `one_hour`: cache
    /// writes went to the 1-hour cache.
    pub fn cost(&self, model: &str, usage: &Usage, one_hour: bool) -> Option<f64> {
        let p = self.price(model)?;
        let write = if one_hour {
            p.cache_write_1h
        } else {
            p.cache_write
        };
        let m = |tokens: u64, price: f64| tokens as f64 * price / 1e6;
        Some(
            m(usage.input_tokens, p.input)
                + m(usage.cache_read_input_tokens, p.cached_input)
                + m(usage.cache_creation_input_tokens, write)
                + m(usage.output_tokens, p.output),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_parse_and_match_the_longest_prefix() {
        let p = Prices::defaults();
        assert!(p.models.len() >= 15, "{}", p.models.len());
        assert_eq!(
            p.price("anthropic:claude-sonnet-4-5-20250929")
                .map(|p| p.input),
            Some(3.0)
        );
        assert_eq!(p.price("openai:gpt-4.1-mini").map(|p| p.input), Some(0.4));
        assert_eq!(p.price("gpt-4.1").map(|p| p.input), Some(2.0));
        assert_eq!(
            p.price("openai:gpt-5-mini-2025-08-07").map(|p| p.output),
            Some(2.0)
        );
        assert_eq!(p.price("openai:llama3.1:8b"), None);
        assert_eq!(p.price("offline"), None);
    }

    #[test]
    fn a_call_costs_each_kind_of_token_at_its_price() {
        let p = Prices::defaults();
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            cache_read_input_tokens: 2_000_000,
            cache_creation_input_tokens: 400_000,
        };
        let cost = p.cost("anthropic:claude-sonnet-4-5", &usage, false);
        // 3 + 1.5 + 0.6 + 1.5
        assert!((cost.unwrap_or(0.0) - 6.6).abs() < 1e-9, "{cost:?}");
        let hour = p.cost("anthropic:claude-sonnet-4-5", &usage, true);
        // 3 + 0.6 + 2.4 + 1.5
        assert!((hour.unwrap_or(0.0) - 7.5).abs() < 1e-9, "{hour:?}");
        assert_eq!(p.cost("openai:qwen2.5:7b", &usage, false), None);
    }

    #[test]
    fn a_file_adds_and_replaces_models_and_bad_entries_are_refused() {
        let custom = Prices::parse(
            "[models.\"qwen2.5\"]\ninput = 0\noutput = 0\n[models.\"gpt-4.1-mini\"]\ninput = 1\noutput = 2\n",
        )
        .expect("valid");
        assert_eq!(
            custom.price("openai:qwen2.5:7b"),
            Some(&Price {
                input: 0.0,
                cached_input: 0.0,
                cache_write: 0.0,
                cache_write_1h: 0.0,
                output: 0.0
            })
        );
        for bad in [
            "[models.x]\noutput = 1\n",
            "[models.x]\ninput = -1\noutput = 1\n",
            "[models.x]\ninput = \"cheap\"\noutput = 1\n",
            "models = 3\n",
            "[models\n",
        ] {
            assert!(Prices::parse(bad).is_err(), "{bad}");
        }
        let dir = std::env::temp_dir().join(format!("prices-{}.toml", std::process::id()));
        std::fs::write(&dir, "[models.\"gpt-4.1-mini\"]\ninput = 1\noutput = 2\n").expect("write");
        let loaded = Prices::load(&dir).expect("load");
        let _ = std::fs::remove_file(&dir);
        assert_eq!(loaded.price("gpt-4.1-mini").map(|p| p.input), Some(1.0));
        assert_eq!(loaded.price("claude-haiku-4-5").map(|p| p.input), Some(1.0));
    }
}
