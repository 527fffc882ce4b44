//! Who a push to the app or to a tag expression reaches: the one rule that the per-message
//! filter of a device's broadcast log ([`crate::push::broadcast_admit`]) and the store's
//! audience count (`DeviceRegistry::count_audience`) both apply; and its stored form, the
//! text a push's envelope and its delivery record keep (written by [`Audience::stored_text`],
//! read back by [`Audience::from_stored`], the one place a stored audience is parsed).

use herald_core::error::HeraldError;

use crate::tags::TagExpr;

/// The devices a broadcast-log push is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Audience {
    /// Every active device of the app.
    All,
    /// Active devices whose tags satisfy the expression.
    Tags(TagExpr),
}

impl Audience {
    /// Whether a device is reached: it is active, and its tags (`has_tag` says whether it holds
    /// one) satisfy the expression, if there is one.
    pub fn reaches(&self, active: bool, has_tag: impl Fn(&str) -> bool) -> bool {
        active
            && match self {
                Audience::All => true,
                Audience::Tags(expr) => expr.matches(has_tag),
            }
    }

    /// [`Audience::reaches`] for a device holding `tags`, sorted as devices store them.
    pub fn reaches_tags(&self, active: bool, tags: &[String]) -> bool {
        self.reaches(active, |t| {
            tags.binary_search_by(|x| x.as_str().cmp(t)).is_ok()
        })
    }

    /// The stored form: the expression's text for a tag push, nothing for the whole app.
    pub fn stored_text(&self) -> Option<String> {
        match self {
            Audience::All => None,
            Audience::Tags(expr) => Some(expr.to_string()),
        }
    }

    /// Reads [`Audience::stored_text`]'s form back: no text is the whole app. A text that no
    /// longer parses (it did when the push was accepted) is an error; each reader decides what
    /// a damaged audience means for it.
    pub fn from_stored(text: Option<&str>) -> Result<Audience, HeraldError> {
        match text {
            None => Ok(Audience::All),
            Some(text) => TagExpr::parse(text).map(Audience::Tags),
        }
    }

    /// The tags that decide whether a device is reached: a device holding none of them is
    /// reached exactly when `reaches(active, |_| false)` is. Empty for [`Audience::All`].
    /// A store counting an audience reads only the devices holding one of these.
    pub fn named_tags(&self) -> Vec<&str> {
        match self {
            Audience::All => Vec::new(),
            Audience::Tags(expr) => expr.tags(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(list: &[&str]) -> Vec<String> {
        list.iter().map(|t| t.to_string()).collect()
    }

    #[test]
    fn active_devices_whose_tags_satisfy_the_expression_are_reached() {
        let sports = Audience::Tags(TagExpr::parse("sports AND NOT muted").unwrap());
        assert!(sports.reaches_tags(true, &tags(&["sports", "uk"])));
        assert!(!sports.reaches_tags(true, &tags(&["muted", "sports"])));
        assert!(!sports.reaches_tags(false, &tags(&["sports"])));
        assert!(Audience::All.reaches_tags(true, &[]));
        assert!(!Audience::All.reaches_tags(false, &tags(&["sports"])));
        assert_eq!(sports.named_tags(), vec!["muted", "sports"]);
        assert!(Audience::All.named_tags().is_empty());
        let not_muted = Audience::Tags(TagExpr::parse("NOT muted").unwrap());
        assert!(not_muted.reaches(true, |_| false));
    }

    #[test]
    fn the_stored_form_reads_back_as_the_same_audience() {
        let sports = Audience::Tags(TagExpr::parse("sports AND (uk OR ie)").unwrap());
        let text = sports.stored_text();
        assert_eq!(text.as_deref(), Some("sports AND (uk OR ie)"));
        assert_eq!(Audience::from_stored(text.as_deref()).unwrap(), sports);
        assert_eq!(Audience::All.stored_text(), None);
        assert_eq!(Audience::from_stored(None).unwrap(), Audience::All);
        let damaged = Audience::from_stored(Some("sports AND")).unwrap_err();
        assert_eq!(
            damaged.code,
            herald_core::error::ErrorCode::TagExpressionInvalid
        );
    }
}
