//! Query strings, read one way on every route that has one: each route names the parameters it
//! takes, a parameter it does not take or one given twice is refused, and values follow
//! `herald_proto::query`'s rule (numbers within the documented range, flags `true`/`false`),
//! so every refusal names the parameter: `limit: must be a whole number from 1 to 1000, not
//! "abc"`.

use std::fmt::Display;
use std::str::FromStr;

use herald_core::HeraldError;
use herald_proto::query::{flag, shorten, whole_number};

/// Most entries one page of any list holds, and what `limit` may be at most (docs/openapi.yaml).
pub(crate) const MAX_PAGE: usize = 1000;

/// A route's query parameters, decoded.
pub(crate) struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Decodes `raw` for a route that takes the parameters `allowed`.
    pub(crate) fn parse(raw: Option<&str>, allowed: &[&str]) -> Result<Query, HeraldError> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        for (name, value) in form_urlencoded::parse(raw.unwrap_or("").as_bytes()).into_owned() {
            if !allowed.contains(&name.as_str()) {
                return Err(HeraldError::bad_request(format!(
                    "unknown parameter {:?}: this route takes {}",
                    shorten(&name),
                    allowed.join(", ")
                )));
            }
            if pairs.iter().any(|(n, _)| *n == name) {
                return Err(HeraldError::bad_request(format!(
                    "{name}: given more than once; give it once"
                )));
            }
            pairs.push((name, value));
        }
        Ok(Query { pairs })
    }

    /// The value of `name`, if given.
    pub(crate) fn text(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The value of `name` as a whole number from `min` to `max`, if given.
    pub(crate) fn number<T>(&self, name: &str, min: T, max: T) -> Result<Option<T>, HeraldError>
    where
        T: FromStr + PartialOrd + Display + Copy,
    {
        self.text(name)
            .map(|v| whole_number(name, v, min, max))
            .transpose()
    }

    /// `limit`: a page size from 1 to [`MAX_PAGE`], 100 when not given.
    pub(crate) fn limit(&self) -> Result<usize, HeraldError> {
        Ok(self.number("limit", 1, MAX_PAGE)?.unwrap_or(100))
    }

    /// The value of `name` as `true` or `false`, if given.
    pub(crate) fn flag(&self, name: &str) -> Result<Option<bool>, HeraldError> {
        self.text(name).map(|v| flag(name, v)).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_decoded_and_checked() {
        let q = Query::parse(
            Some("after=a%2Fb&limit=5&devices=true"),
            &["after", "limit", "devices"],
        )
        .unwrap();
        assert_eq!(q.text("after"), Some("a/b"));
        assert_eq!(q.limit().unwrap(), 5);
        assert_eq!(q.flag("devices").unwrap(), Some(true));
        assert_eq!(q.flag("other").unwrap(), None);
        let q = Query::parse(None, &["limit"]).unwrap();
        assert_eq!(q.limit().unwrap(), 100);
    }

    #[test]
    fn refusals_name_the_parameter() {
        for (raw, message) in [
            (
                "limit=0",
                "limit: must be a whole number from 1 to 1000, not \"0\"",
            ),
            (
                "limit=1001",
                "limit: must be a whole number from 1 to 1000, not \"1001\"",
            ),
            (
                "limit=abc",
                "limit: must be a whole number from 1 to 1000, not \"abc\"",
            ),
            (
                "limit=",
                "limit: must be a whole number from 1 to 1000, not \"\"",
            ),
            (
                "limit=5&limit=6",
                "limit: given more than once; give it once",
            ),
            (
                "lmit=5",
                "unknown parameter \"lmit\": this route takes after, limit",
            ),
        ] {
            let e = Query::parse(Some(raw), &["after", "limit"])
                .and_then(|q| q.limit())
                .unwrap_err();
            assert_eq!(e.message, message, "{raw}");
        }
    }
}
