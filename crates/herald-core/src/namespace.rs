//! Namespaces: options that apply to every channel whose name starts with a prefix (history
//! size and age, whether the last message is sent on subscribe). The longest matching prefix
//! wins; channels matching no prefix get the defaults.

use crate::log::Retention;

/// Options for the channels of one namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NamespaceOptions {
    /// How much history the channels keep.
    pub retention: Retention,
    /// Send the channel's last message on subscribe unless the client says otherwise.
    pub last_on_subscribe: bool,
}

/// The default options and the prefixed namespaces.
#[derive(Debug, Clone, Default)]
pub struct Namespaces {
    default: NamespaceOptions,
    prefixed: Vec<(String, NamespaceOptions)>,
}

impl Namespaces {
    /// Builds the table; `prefixed` may be in any order.
    pub fn new(default: NamespaceOptions, mut prefixed: Vec<(String, NamespaceOptions)>) -> Self {
        prefixed.sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
        Namespaces { default, prefixed }
    }

    /// Options for `channel`.
    pub fn options(&self, channel: &str) -> &NamespaceOptions {
        self.prefixed
            .iter()
            .find(|(prefix, _)| channel.starts_with(prefix.as_str()))
            .map_or(&self.default, |(_, o)| o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins() {
        let last = NamespaceOptions {
            last_on_subscribe: true,
            ..Default::default()
        };
        let short = NamespaceOptions {
            retention: Retention {
                max_messages: 5,
                max_age_ms: 0,
            },
            ..Default::default()
        };
        let ns = Namespaces::new(
            NamespaceOptions::default(),
            vec![("prices/".into(), short), ("prices/EUR".into(), last)],
        );
        assert!(ns.options("prices/EURUSD").last_on_subscribe);
        assert_eq!(ns.options("prices/GBPUSD").retention.max_messages, 5);
        assert_eq!(ns.options("news"), &NamespaceOptions::default());
    }
}
