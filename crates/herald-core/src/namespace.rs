//! Namespaces: options that apply to every channel whose name starts with a prefix (history
//! size and age, whether the last message is sent on subscribe, whether its channels are
//! presence channels and their limits). The longest matching prefix
//! wins; channels matching no prefix get the defaults.
//!
//! Reserved logs (an app's logs no client can name, see [`crate::tenant`]) get their options from
//! the crate that owns them, registered at start-up with [`Namespaces::reserve`]; those come
//! before any configured prefix.
//!
//! A protocol whose channel names carry their kind may make the channels of every app whose
//! name within the app starts with a prefix presence channels
//! ([`Namespaces::presence_in_every_app`]: Pusher's `presence-`, registered by herald-pusher);
//! their presence limits come before any configured namespace's, their other options do not
//! change.

use crate::log::Retention;

/// Options for the channels of one namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NamespaceOptions {
    /// How much history the channels keep.
    pub retention: Retention,
    /// Send the channel's last message on subscribe unless the client says otherwise.
    pub last_on_subscribe: bool,
    /// The channels are presence channels, with these limits ([`crate::presence`]); `None`
    /// for every other channel.
    pub presence: Option<crate::presence::PresenceLimits>,
}

/// The default options and the prefixed namespaces.
#[derive(Debug, Clone, Default)]
pub struct Namespaces {
    default: NamespaceOptions,
    prefixed: Vec<(String, NamespaceOptions)>,
    reserved: Vec<(String, NamespaceOptions)>,
    /// Presence limits for every app's channels whose name within the app starts with the
    /// prefix, longest prefix first ([`Namespaces::presence_in_every_app`]).
    every_app_presence: Vec<(String, crate::presence::PresenceLimits)>,
    /// Whether any namespace makes presence channels: while none does,
    /// [`Namespaces::presence`] answers at one branch.
    any_presence: bool,
}

impl Namespaces {
    /// Builds the table; `prefixed` may be in any order.
    pub fn new(default: NamespaceOptions, mut prefixed: Vec<(String, NamespaceOptions)>) -> Self {
        prefixed.sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
        let any_presence =
            default.presence.is_some() || prefixed.iter().any(|(_, o)| o.presence.is_some());
        Namespaces {
            default,
            prefixed,
            reserved: Vec::new(),
            every_app_presence: Vec::new(),
            any_presence,
        }
    }

    /// Whether any namespace makes presence channels.
    pub fn any_presence(&self) -> bool {
        self.any_presence
    }

    /// The presence limits of `channel` (a full name) if it is a presence channel: one branch
    /// on a server without presence namespaces, else [`Namespaces::options`].
    #[inline]
    pub fn presence(&self, channel: &str) -> Option<&crate::presence::PresenceLimits> {
        if !self.any_presence {
            return None;
        }
        if !self.every_app_presence.is_empty() {
            let (_, local) = crate::tenant::split_app(channel);
            if let Some((_, limits)) = self
                .every_app_presence
                .iter()
                .find(|(prefix, _)| local.starts_with(prefix.as_str()))
            {
                return Some(limits);
            }
        }
        self.options(channel).presence.as_ref()
    }

    /// Makes the channels of every app whose name within the app starts with `local_prefix`
    /// presence channels with `limits` (before any configured namespace's), for a protocol
    /// whose channel names say their kind (Pusher's `presence-`). Their other options stay
    /// the namespaces'. A later registration of the same prefix replaces the earlier one.
    pub fn presence_in_every_app(
        &mut self,
        local_prefix: &str,
        limits: crate::presence::PresenceLimits,
    ) {
        self.every_app_presence
            .retain(|(prefix, _)| prefix != local_prefix);
        self.every_app_presence
            .push((local_prefix.to_string(), limits));
        self.every_app_presence
            .sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
        self.any_presence = true;
    }

    /// Gives `options` to the reserved logs of every app whose name within the app starts with
    /// `local_prefix` (which starts with [`crate::tenant::RESERVED`], e.g. `$app`). A later
    /// registration of the same prefix replaces the earlier one.
    pub fn reserve(&mut self, local_prefix: &str, options: NamespaceOptions) {
        debug_assert!(local_prefix.starts_with(crate::tenant::RESERVED));
        self.reserved.retain(|(prefix, _)| prefix != local_prefix);
        self.reserved.push((local_prefix.to_string(), options));
        self.reserved
            .sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
    }

    /// Options for `channel` (a full name).
    pub fn options(&self, channel: &str) -> &NamespaceOptions {
        if let Some(local) = crate::tenant::scoped_local(channel)
            .filter(|local| local.starts_with(crate::tenant::RESERVED))
        {
            if let Some((_, o)) = self
                .reserved
                .iter()
                .find(|(prefix, _)| local.starts_with(prefix.as_str()))
            {
                return o;
            }
        }
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
        assert_eq!(ns.presence("prices/EURUSD"), None);
    }

    #[test]
    fn presence_in_every_app_covers_every_apps_channels_of_the_prefix() {
        let rooms = NamespaceOptions {
            presence: Some(crate::presence::PresenceLimits::default()),
            ..Default::default()
        };
        let mut ns = Namespaces::new(
            NamespaceOptions::default(),
            vec![("presence-big".into(), rooms)],
        );
        let small = crate::presence::PresenceLimits {
            max_members: 100,
            max_data_bytes: 1024,
        };
        ns.presence_in_every_app("presence-", small);
        assert!(ns.any_presence());
        assert_eq!(ns.presence("presence-room"), Some(&small));
        assert_eq!(ns.presence("shop~presence-room"), Some(&small));
        // Before the configured namespace's limits.
        assert_eq!(ns.presence("presence-big-1"), Some(&small));
        assert_eq!(ns.presence("shop~news"), None);
        assert_eq!(ns.presence("private-presence-x"), None);
        assert_eq!(
            ns.options("shop~presence-room"),
            &NamespaceOptions::default()
        );
    }

    #[test]
    fn presence_limits_come_from_presence_namespaces_only() {
        let rooms = NamespaceOptions {
            presence: Some(crate::presence::PresenceLimits::default()),
            ..Default::default()
        };
        let ns = Namespaces::new(NamespaceOptions::default(), vec![("rooms/".into(), rooms)]);
        assert_eq!(
            ns.presence("rooms/1"),
            Some(&crate::presence::PresenceLimits::default())
        );
        assert_eq!(ns.presence("news"), None);
    }

    #[test]
    fn reserved_logs_take_the_options_registered_for_them() {
        let long = NamespaceOptions {
            retention: Retention {
                max_messages: 9,
                max_age_ms: 9,
            },
            ..Default::default()
        };
        let mut ns = Namespaces::new(
            NamespaceOptions::default(),
            vec![("shop~".into(), NamespaceOptions::default())],
        );
        assert_eq!(ns.options("shop~$app"), &NamespaceOptions::default());
        ns.reserve("$app", long);
        ns.reserve("$dev/", long);
        for full in ["shop~$app", "default~$app", "shop~$dev/d1"] {
            assert_eq!(ns.options(full), &long, "{full}");
        }
        assert_eq!(ns.options("shop~news"), &NamespaceOptions::default());
        assert_eq!(ns.options("$app"), &NamespaceOptions::default());
    }
}
