//! Value parsers shared by the client commands: the server URL (`--url`, with or without a
//! scheme), durations given either as plain seconds or with a unit (`3600`, `1h`, `500ms`), and
//! message data (JSON unless `--string` says it is text).

use std::time::Duration;

use serde_json::Value;

/// `--url`: `http(s)://HOST[:PORT]` (or `ws(s)://`), or just `HOST[:PORT]`, taken as `http://`.
pub fn server_url(text: &str) -> Result<String, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("the server URL is empty (e.g. http://127.0.0.1:7070)".into());
    }
    let url = match text.split_once("://") {
        Some((scheme, _)) => {
            if !matches!(scheme, "http" | "https" | "ws" | "wss") {
                return Err(format!(
                    "{text:?} has the scheme {scheme:?}: use http://HOST:PORT or https://HOST"
                ));
            }
            text.to_owned()
        }
        None => format!("http://{text}"),
    };
    match reqwest::Url::parse(&url) {
        Ok(parsed) if parsed.host_str().is_some_and(|h| !h.is_empty()) => Ok(url),
        Ok(_) => Err(format!(
            "{text:?} names no host (e.g. http://127.0.0.1:7070)"
        )),
        Err(e) => Err(format!(
            "{text:?} is not a server URL ({e}); e.g. http://127.0.0.1:7070"
        )),
    }
}

/// Whole seconds, as `3600` or with a unit: `90s`, `15m`, `1h`, `7d`.
pub fn whole_seconds(text: &str) -> Result<u64, String> {
    if let Ok(secs) = text.trim().parse::<u64>() {
        return Ok(secs);
    }
    let d = humantime::parse_duration(text.trim()).map_err(|e| {
        format!(
            "{text:?} is not a duration ({e}): give seconds (3600) or a unit (90s, 15m, 1h, 7d)"
        )
    })?;
    if d.subsec_nanos() != 0 {
        return Err(format!("{text:?} is not a whole number of seconds"));
    }
    Ok(d.as_secs())
}

/// Seconds, possibly fractional, as `2.5` or with a unit: `500ms`, `3s`, `1m`.
pub fn seconds(text: &str) -> Result<f64, String> {
    if let Ok(secs) = text.trim().parse::<f64>() {
        if secs.is_finite() && secs >= 0.0 {
            return Ok(secs);
        }
        return Err(format!("{text:?} is not a number of seconds"));
    }
    humantime::parse_duration(text.trim())
        .map(|d: Duration| d.as_secs_f64())
        .map_err(|e| {
            format!("{text:?} is not a duration ({e}): give seconds (2.5) or a unit (500ms, 3s)")
        })
}

/// Message data as typed: JSON, or with `as_string` the text itself as a JSON string. Text that
/// is not JSON is an error (a mistyped object must not be published as a string).
pub fn data(text: &str, as_string: bool) -> Result<Value, String> {
    if as_string {
        return Ok(Value::String(text.to_owned()));
    }
    serde_json::from_str(text).map_err(|e| {
        format!(
            "DATA is not valid JSON ({e}); to send it as text add --string, or quote it as a \
             JSON string: '\"{}\"'",
            text.escape_default()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_without_a_scheme_are_http_and_others_are_explained() {
        assert_eq!(
            server_url("127.0.0.1:7171").unwrap(),
            "http://127.0.0.1:7171"
        );
        assert_eq!(server_url("push.internal").unwrap(), "http://push.internal");
        assert_eq!(
            server_url("https://push.example.com/").unwrap(),
            "https://push.example.com/"
        );
        assert_eq!(server_url(" ws://h:1 ").unwrap(), "ws://h:1");
        assert!(server_url("ftp://h")
            .unwrap_err()
            .contains("scheme \"ftp\""));
        assert!(server_url("").unwrap_err().contains("empty"));
        assert!(server_url("http://")
            .unwrap_err()
            .contains("http://127.0.0.1:7070"));
        assert!(server_url("127.0.0.1:99999").is_err());
    }

    #[test]
    fn durations_are_seconds_or_have_a_unit() {
        assert_eq!(whole_seconds("3600"), Ok(3600));
        assert_eq!(whole_seconds("1h"), Ok(3600));
        assert_eq!(whole_seconds("7d"), Ok(7 * 86400));
        assert!(whole_seconds("1.5s").unwrap_err().contains("whole number"));
        assert!(whole_seconds("soon")
            .unwrap_err()
            .contains("not a duration"));
        assert_eq!(seconds("2.5"), Ok(2.5));
        assert_eq!(seconds("500ms"), Ok(0.5));
        assert!(seconds("-1").is_err());
        assert!(seconds("NaN").is_err());
    }

    #[test]
    fn data_is_json_unless_said_to_be_text() {
        assert_eq!(data(r#"{"a":1}"#, false).unwrap()["a"], 1);
        assert_eq!(data("42", false), Ok(Value::from(42)));
        assert_eq!(data("42", true), Ok(Value::from("42")));
        assert_eq!(data("hello world", true), Ok(Value::from("hello world")));
        let e = data(r#"{"title": hello}"#, false).unwrap_err();
        assert!(
            e.contains("not valid JSON") && e.contains("--string"),
            "{e}"
        );
    }
}
