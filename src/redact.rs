//! Secrets out of logs (docs/limits.md "Logs"): a URL as it may be logged or stored, with its
//! user, password and query string replaced by `***` (`postgres://***:***@db:5432/app`,
//! `https://hooks.example/in?***`), and text (an error's message) with such a URL's secret
//! parts replaced wherever it quotes them.
//!
//! A leaf: owns only the rewriting of text; imports nothing of the crate. Every log line and
//! stored error that names the store's or the webhook's URL goes through it.

/// What a secret part of a URL is replaced by.
pub const MASK: &str = "***";

/// `raw` with the user, password and query string of the URL in it replaced by [`MASK`];
/// text that is not a URL with an authority (`sqlite:data.db`, `memory:`) is returned as it is.
pub fn url(raw: &str) -> String {
    let Ok(mut parsed) = reqwest::Url::parse(raw) else {
        return raw.to_owned();
    };
    if parsed.cannot_be_a_base() {
        return raw.to_owned();
    }
    if !parsed.username().is_empty() {
        let _ = parsed.set_username(MASK);
    }
    if parsed.password().is_some() {
        let _ = parsed.set_password(Some(MASK));
    }
    if parsed.query().is_some() {
        parsed.set_query(Some(MASK));
    }
    parsed.to_string()
}

/// `text` with every secret part of `raw` (its user, password and query string, as written in
/// `raw` and as a URL parser normalises them) replaced by [`MASK`].
pub fn text(text: &str, raw: &str) -> String {
    let Ok(parsed) = reqwest::Url::parse(raw) else {
        return text.to_owned();
    };
    let mut secrets: Vec<String> = Vec::new();
    if let Some(query) = parsed.query() {
        secrets.push(format!("?{query}"));
    }
    if let Some(password) = parsed.password() {
        secrets.push(format!(":{password}@"));
    }
    if !parsed.username().is_empty() {
        secrets.push(format!("{}:", parsed.username()));
        secrets.push(format!("{}@", parsed.username()));
    }
    // The whole URL first (as given and as normalised), then its parts wherever else quoted.
    let mut out = text
        .replace(raw, &url(raw))
        .replace(parsed.as_str(), &url(raw));
    for secret in secrets {
        if secret.len() > 2 {
            let masked = match secret.as_bytes()[0] {
                b'?' => format!("?{MASK}"),
                b':' => format!(":{MASK}@"),
                _ => format!("{MASK}{}", &secret[secret.len() - 1..]),
            };
            out = out.replace(&secret, &masked);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_users_and_queries_are_masked() {
        assert_eq!(
            url("postgres://app:s3cret@db.internal:5432/fairy?sslmode=require"),
            "postgres://***:***@db.internal:5432/fairy?***"
        );
        assert_eq!(
            url("https://hook-user:hook-pass@hooks.example/in?token=abc&x=1"),
            "https://***:***@hooks.example/in?***"
        );
        assert_eq!(url("https://hooks.example/in"), "https://hooks.example/in");
        assert_eq!(url("sqlite:data/fairyring.db"), "sqlite:data/fairyring.db");
        assert_eq!(url("memory:"), "memory:");
        assert_eq!(url("not a url"), "not a url");
    }

    #[test]
    fn text_quoting_a_url_loses_its_secrets() {
        let raw = "http://u:p4ss@127.0.0.1:9/hook?token=t0ken";
        let error = format!("error sending request for url ({raw}): connection refused");
        let clean = text(&error, raw);
        assert!(
            !clean.contains("p4ss") && !clean.contains("t0ken"),
            "{clean}"
        );
        assert!(clean.contains("127.0.0.1:9/hook"), "{clean}");
        // Parts quoted on their own go too.
        let clean = text("query was ?token=t0ken", raw);
        assert!(!clean.contains("t0ken"), "{clean}");
    }
}
