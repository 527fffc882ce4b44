//! The anonymous mode's access rules (docs/design/mqtt.md, "Anonymous mode"): what a client
//! without credentials, put in `mqtt.anonymous_app`, may publish, subscribe to and receive.
//!
//! The rules are an ordered list of `{ allow|deny, publish|subscribe|both, filter }`, each
//! filter an MQTT topic filter (`+` and `#` allowed, no `$share/`). Deny wins, so the order
//! never changes a decision; it is kept as the operator wrote it, for showing the rules back.
//!
//! - **Publish** to topic `t` is allowed when an allow rule for publishing matches `t` and no
//!   deny rule for publishing does. A refused PUBLISH gets 0x87 Not authorized (PUBACK or
//!   PUBREC), or is dropped and counted at QoS 0.
//! - **Subscribe** to filter `f` ([`Rules::may_subscribe`]) is refused (0x87 in the SUBACK)
//!   when a deny rule for subscribing *covers* `f`, or when no allow rule for subscribing
//!   covers it. Filter `a` covers filter `b` when every topic `b` matches, `a` matches too:
//!   `#` covers `sensors/+`, `sensors/#` covers `sensors/+/temp` and `sensors` itself,
//!   `sensors/+` does not cover `sensors/#`. An allowed subscription that a deny rule
//!   *overlaps* (some topic both match: `#` and a deny of `secret/x`) is
//!   [`Decision::AllowedFiltered`]: it stands, and each delivery is checked.
//! - **Receive**: a message on topic `t` is delivered to a filtered subscription only when no
//!   deny rule for subscribing matches `t` ([`Rules::may_receive`], checked per delivery, as
//!   Mosquitto checks read access), so with `allow subscribe #` and `deny subscribe secret/x`,
//!   subscribing to `secret/x` is refused, subscribing to `#` is allowed, and through it
//!   `secret/y` arrives while `secret/x` does not.
//!
//! Topics starting with `$` follow [MQTT-4.7.2-1] here too: a filter starting with `+` or `#`
//! neither matches nor covers them, so `allow both #` grants no `$SYS/...` and no `$device`; a
//! rule must name them (`$SYS/#`). With no rules, nothing is allowed.

use std::fmt;

use crate::packet::topic::{matches, TopicError, TopicFilter};
use crate::packet::ReasonCode;

/// Whether a rule grants or refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Effect {
    /// Grants what it matches, unless a deny rule refuses it.
    Allow,
    /// Refuses what it matches, whatever allows it.
    Deny,
}

/// What a rule is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// PUBLISH (and a will's topic).
    Publish,
    /// SUBSCRIBE, and receiving through a subscription.
    Subscribe,
    /// Both.
    Both,
}

impl Action {
    fn includes(self, asked: Action) -> bool {
        self == Action::Both || self == asked
    }
}

/// One rule: `effect` for `action` on the topics `filter` matches.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Rule {
    /// Allow or deny.
    pub effect: Effect,
    /// Publish, subscribe or both.
    pub action: Action,
    /// An MQTT topic filter, without `$share/`.
    pub filter: String,
}

/// A rule whose filter is not a topic filter the rules can hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("anonymous access rule {index} (filter {filter:?}): {why}")]
pub struct InvalidRule {
    /// The rule's position in the list, from 0.
    pub index: usize,
    /// Its filter.
    pub filter: String,
    /// What is wrong with it.
    pub why: String,
}

/// What [`Rules::may_subscribe`] decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    /// Allowed, and no deny rule overlaps it: every matching message is delivered.
    Allowed,
    /// Allowed, but a deny rule matches some of its topics: check [`Rules::may_receive`] per
    /// delivery.
    AllowedFiltered,
    /// Refused: 0x87 Not authorized in the SUBACK.
    Refused,
}

impl Decision {
    /// Whether the subscription may be made.
    pub fn is_allowed(self) -> bool {
        self != Decision::Refused
    }

    /// The SUBACK reason code of a refusal (0x87 Not authorized); `None` when allowed.
    pub fn refusal_code(self) -> Option<ReasonCode> {
        (self == Decision::Refused).then_some(ReasonCode::NotAuthorized)
    }
}

/// The anonymous mode's rules, checked (see the module doc).
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Rules {
    rules: Vec<Rule>,
}

impl Rules {
    /// The rules, in order, once every filter is checked to be a valid topic filter without a
    /// `$share/` prefix.
    pub fn new(rules: Vec<Rule>) -> Result<Rules, InvalidRule> {
        for (index, rule) in rules.iter().enumerate() {
            let invalid = |why: String| InvalidRule {
                index,
                filter: rule.filter.clone(),
                why,
            };
            let filter = TopicFilter::new(rule.filter.as_str())
                .map_err(|e: TopicError| invalid(e.to_string()))?;
            if filter.shared().is_some() {
                return Err(invalid(
                    "a rule's filter cannot be a shared subscription".into(),
                ));
            }
        }
        Ok(Rules { rules })
    }

    /// The rules, in the order given.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Whether an anonymous client may publish to topic name `topic`.
    pub fn may_publish(&self, topic: &str) -> bool {
        self.matching(Effect::Allow, Action::Publish, |f| matches(f, topic))
            && !self.matching(Effect::Deny, Action::Publish, |f| matches(f, topic))
    }

    /// Whether an anonymous client may subscribe to topic filter `filter` (valid, its
    /// `$share/{ShareName}/` prefix stripped), and whether its deliveries need checking.
    pub fn may_subscribe(&self, filter: &str) -> Decision {
        if self.matching(Effect::Deny, Action::Subscribe, |deny| covers(deny, filter))
            || !self.matching(Effect::Allow, Action::Subscribe, |allow| {
                covers(allow, filter)
            })
        {
            Decision::Refused
        } else if self.matching(Effect::Deny, Action::Subscribe, |deny| {
            overlaps(deny, filter)
        }) {
            Decision::AllowedFiltered
        } else {
            Decision::Allowed
        }
    }

    /// Whether a message on topic `topic` may be delivered through an allowed subscription:
    /// no deny rule for subscribing matches it.
    pub fn may_receive(&self, topic: &str) -> bool {
        !self.matching(Effect::Deny, Action::Subscribe, |f| matches(f, topic))
    }

    /// Whether some rule with `effect` for `action` has a filter `test` accepts.
    fn matching(&self, effect: Effect, action: Action, test: impl Fn(&str) -> bool) -> bool {
        self.rules
            .iter()
            .any(|r| r.effect == effect && r.action.includes(action) && test(&r.filter))
    }
}

impl fmt::Debug for Rules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.rules).finish()
    }
}

/// Whether a filter's first level is a wildcard, so it matches no topic starting with `$`
/// [MQTT-4.7.2-1].
fn starts_with_wildcard(filter: &str) -> bool {
    filter.starts_with(['+', '#'])
}

/// Whether every topic `filter` matches starts with `$`: its first level is a literal starting
/// with `$`.
fn only_dollar_topics(filter: &str) -> bool {
    filter.starts_with('$')
}

/// Whether filter `a` covers filter `b` (both valid, without `$share/`): every topic `b`
/// matches, `a` matches too, [MQTT-4.7.2-1] included.
pub fn covers(a: &str, b: &str) -> bool {
    if starts_with_wildcard(a) && only_dollar_topics(b) {
        return false;
    }
    if b == "#" {
        // Every topic, of one level or more: `+/#` matches those too (its `#` the parent).
        return a == "#" || a == "+/#";
    }
    let mut a_levels = a.split('/');
    let mut b_levels = b.split('/');
    loop {
        match (a_levels.next(), b_levels.next()) {
            (Some("#"), _) => return true,
            (_, Some("#")) => return false,
            (Some("+"), Some(_)) => {}
            (Some(x), Some(y)) if x == y => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

/// Whether filters `a` and `b` (both valid, without `$share/`) overlap: some topic matches
/// both, [MQTT-4.7.2-1] included.
pub fn overlaps(a: &str, b: &str) -> bool {
    if (starts_with_wildcard(a) && only_dollar_topics(b))
        || (starts_with_wildcard(b) && only_dollar_topics(a))
    {
        return false;
    }
    let mut a_levels = a.split('/');
    let mut b_levels = b.split('/');
    loop {
        match (a_levels.next(), b_levels.next()) {
            (Some("#"), _) | (_, Some("#")) => return true,
            (Some("+"), Some(_)) | (Some(_), Some("+")) => {}
            (Some(x), Some(y)) if x == y => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests;
