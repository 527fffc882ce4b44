//! Who a push to the app or to a tag expression reaches: the one rule that the per-message
//! filter of a device's broadcast log ([`crate::push::broadcast_admit`]) and the store's
//! audience count (`DeviceRegistry::count_audience`) both apply.

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
}
