//! The one rule for query parameters' values, on every route of the API and the transports: a
//! number is a whole number within the range the route documents, a flag is `true` or
//! `false`, and a refusal names the parameter and what it may be:
//! `limit: must be a whole number from 1 to 1000, not "abc"`.

use std::fmt::Display;
use std::str::FromStr;

use crate::error::HeraldError;

/// `value` of the query parameter `name` as a whole number from `min` to `max`.
pub fn whole_number<T>(name: &str, value: &str, min: T, max: T) -> Result<T, HeraldError>
where
    T: FromStr + PartialOrd + Display + Copy,
{
    value
        .parse::<T>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| {
            HeraldError::bad_request(format!(
                "{name}: must be a whole number from {min} to {max}, not {:?}",
                shorten(value)
            ))
        })
}

/// `value` of the query parameter `name` as `true` or `false`.
pub fn flag(name: &str, value: &str) -> Result<bool, HeraldError> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        other => Err(HeraldError::bad_request(format!(
            "{name}: must be true or false, not {:?}",
            shorten(other)
        ))),
    }
}

/// At most 64 characters of a value quoted back in an error.
pub fn shorten(value: &str) -> String {
    match value.char_indices().nth(64) {
        Some((at, _)) => format!("{}...", &value[..at]),
        None => value.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_whole_and_within_the_range() {
        assert_eq!(whole_number::<usize>("limit", "1", 1, 1000).unwrap(), 1);
        assert_eq!(
            whole_number::<usize>("limit", "1000", 1, 1000).unwrap(),
            1000
        );
        assert_eq!(
            whole_number::<i64>("after", "-3", i64::MIN, i64::MAX).unwrap(),
            -3
        );
        for bad in [
            "0",
            "1001",
            "abc",
            "",
            "1.5",
            "-1",
            "99999999999999999999999",
        ] {
            let e = whole_number::<usize>("limit", bad, 1, 1000).unwrap_err();
            assert_eq!(
                e.message,
                format!("limit: must be a whole number from 1 to 1000, not {bad:?}")
            );
        }
    }

    #[test]
    fn flags_are_true_or_false() {
        assert!(flag("devices", "true").unwrap());
        assert!(!flag("devices", "false").unwrap());
        let e = flag("devices", "yes").unwrap_err();
        assert_eq!(e.message, r#"devices: must be true or false, not "yes""#);
    }

    #[test]
    fn long_values_are_shortened() {
        let e = whole_number::<u64>("since", &"9".repeat(500), 0, 5).unwrap_err();
        assert!(e.message.len() < 150, "{}", e.message);
        assert!(e.message.ends_with("...\""), "{}", e.message);
    }
}
