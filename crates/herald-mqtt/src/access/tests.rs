use super::*;
use proptest::prelude::*;

fn rule(effect: Effect, action: Action, filter: &str) -> Rule {
    Rule {
        effect,
        action,
        filter: filter.into(),
    }
}

fn rules(list: &[(Effect, Action, &str)]) -> Rules {
    Rules::new(list.iter().map(|&(e, a, f)| rule(e, a, f)).collect()).unwrap()
}

use Action::{Both, Publish, Subscribe};
use Effect::{Allow, Deny};

#[test]
fn everything_but_a_secret_topic() {
    let r = rules(&[(Allow, Both, "#"), (Deny, Subscribe, "secret/x")]);
    assert_eq!(r.may_subscribe("secret/x"), Decision::Refused);
    assert_eq!(
        r.may_subscribe("secret/x").refusal_code(),
        Some(ReasonCode::NotAuthorized)
    );
    assert_eq!(
        r.may_subscribe("secret/x").refusal_code().unwrap().value(),
        0x87
    );
    assert_eq!(r.may_subscribe("#"), Decision::AllowedFiltered);
    assert!(r.may_subscribe("#").is_allowed());
    assert_eq!(r.may_subscribe("#").refusal_code(), None);
    assert!(!r.may_receive("secret/x"));
    assert!(r.may_receive("secret/y"));
    assert_eq!(r.may_subscribe("secret/+"), Decision::AllowedFiltered);
    assert_eq!(r.may_subscribe("secret/y"), Decision::Allowed);
    assert_eq!(r.may_subscribe("public/#"), Decision::Allowed);
    assert_eq!(r.may_subscribe("+/y"), Decision::Allowed);
    assert_eq!(r.may_subscribe("+/x"), Decision::AllowedFiltered);
    // The deny is about subscribing: publishing there is allowed.
    assert!(r.may_publish("secret/x"));
}

#[test]
fn deny_wins_whatever_the_order() {
    let denied_first = rules(&[(Deny, Both, "a/#"), (Allow, Both, "#")]);
    let denied_last = rules(&[(Allow, Both, "#"), (Deny, Both, "a/#")]);
    for r in [denied_first, denied_last] {
        assert!(!r.may_publish("a"));
        assert!(!r.may_publish("a/b/c"));
        assert!(r.may_publish("b"));
        assert_eq!(r.may_subscribe("a/+"), Decision::Refused);
        assert_eq!(
            r.may_subscribe("a"),
            Decision::Refused,
            "a/# covers its parent a"
        );
        assert_eq!(r.may_subscribe("#"), Decision::AllowedFiltered);
        assert_eq!(
            r.may_subscribe("+"),
            Decision::AllowedFiltered,
            "+ matches a"
        );
        assert_eq!(r.may_subscribe("+/+/+"), Decision::AllowedFiltered);
        assert_eq!(r.may_subscribe("b/#"), Decision::Allowed);
        assert!(!r.may_receive("a/x"));
        assert!(r.may_receive("ab"));
    }
}

#[test]
fn actions_apply_separately() {
    let r = rules(&[(Allow, Publish, "up/#"), (Allow, Subscribe, "down/#")]);
    assert!(r.may_publish("up/1"));
    assert!(!r.may_publish("down/1"));
    assert_eq!(r.may_subscribe("down/+"), Decision::Allowed);
    assert_eq!(r.may_subscribe("up/+"), Decision::Refused);
    let r = rules(&[(Allow, Both, "#"), (Deny, Publish, "ro/#")]);
    assert!(!r.may_publish("ro/x"));
    assert_eq!(r.may_subscribe("ro/#"), Decision::Allowed);
    assert!(r.may_receive("ro/x"));
}

#[test]
fn an_allow_must_cover_the_whole_filter() {
    let r = rules(&[
        (Allow, Subscribe, "sensors/+/temp"),
        (Allow, Subscribe, "a/#"),
    ]);
    assert_eq!(r.may_subscribe("sensors/kitchen/temp"), Decision::Allowed);
    assert_eq!(r.may_subscribe("sensors/+/temp"), Decision::Allowed);
    assert_eq!(r.may_subscribe("sensors/#"), Decision::Refused);
    assert_eq!(r.may_subscribe("sensors/+/+"), Decision::Refused);
    assert_eq!(r.may_subscribe("#"), Decision::Refused);
    assert_eq!(r.may_subscribe("a"), Decision::Allowed);
    assert_eq!(r.may_subscribe("a/+/#"), Decision::Allowed);
    assert_eq!(r.may_subscribe("a//"), Decision::Allowed);
    assert!(!r.may_publish("a/b"), "only subscribe rules");
}

#[test]
fn dollar_topics_need_rules_that_name_them() {
    let r = rules(&[(Allow, Both, "#"), (Allow, Subscribe, "$SYS/broker/#")]);
    assert!(!r.may_publish("$SYS/x"));
    assert!(!r.may_publish("$device"));
    assert!(r.may_publish("a/$x"));
    assert_eq!(r.may_subscribe("$SYS/#"), Decision::Refused);
    assert_eq!(r.may_subscribe("$SYS/broker/+"), Decision::Allowed);
    assert_eq!(r.may_subscribe("$device"), Decision::Refused);
    // A deny starting with a wildcard does not reach `$` topics either.
    let r = rules(&[(Allow, Both, "$SYS/#"), (Deny, Both, "+/x")]);
    assert!(r.may_publish("$SYS/x"));
    assert_eq!(r.may_subscribe("$SYS/x"), Decision::Allowed);
    assert_eq!(r.may_subscribe("$SYS/+"), Decision::Allowed);
    assert!(r.may_receive("$SYS/x"));
}

#[test]
fn no_rules_allow_nothing() {
    let r = Rules::default();
    assert!(!r.may_publish("a"));
    assert_eq!(r.may_subscribe("#"), Decision::Refused);
    assert!(r.may_receive("a"));
}

#[test]
fn invalid_filters_are_refused_naming_the_rule() {
    let err = Rules::new(vec![rule(Allow, Both, "#"), rule(Deny, Both, "a/#/b")]).unwrap_err();
    assert_eq!(err.index, 1);
    assert_eq!(err.filter, "a/#/b");
    assert!(
        err.to_string()
            .starts_with("anonymous access rule 1 (filter \"a/#/b\"): "),
        "{err}"
    );
    for bad in ["", "a+", "$share/g/#", "a\0"] {
        assert!(Rules::new(vec![rule(Allow, Both, bad)]).is_err(), "{bad:?}");
    }
    let ok = Rules::new(vec![
        rule(Allow, Both, "+/+"),
        rule(Deny, Publish, "$SYS/#"),
    ])
    .unwrap();
    assert_eq!(ok.rules().len(), 2);
}

#[test]
fn covering_edge_cases() {
    for (a, b, expected) in [
        ("#", "#", true),
        ("#", "+", true),
        ("#", "a/b/c", true),
        ("#", "$SYS/x", false),
        ("#", "+/#", true),
        ("+", "#", false),
        ("+", "+", true),
        ("+", "a", true),
        ("+", "a/b", false),
        ("+/#", "#", true),
        ("+/+/#", "#", false),
        ("+/#", "a/#", true),
        ("+/#", "$SYS/#", false),
        ("a/#", "a", true),
        ("a/#", "a/+/b", true),
        ("a/+", "a", false),
        ("a/+", "a/#", false),
        ("a/+", "a/+", true),
        ("a/b", "a/+", false),
        ("a/+/c", "a/b/c", true),
        ("a//c", "a/+/c", false),
        ("+/+", "/", true),
        ("$SYS/#", "$SYS/x/+", true),
        ("+/x", "$SYS/x", false),
        ("$SYS/+", "$SYS", false),
    ] {
        assert_eq!(covers(a, b), expected, "{a} covers {b}");
    }
}

#[test]
fn overlapping_edge_cases() {
    for (a, b, expected) in [
        ("#", "$SYS/x", false),
        ("$SYS/#", "+/x", false),
        ("$SYS/#", "$SYS", true),
        ("a/+", "+/b", true),
        ("a/+", "b/+", false),
        ("a/#", "a", true),
        ("a/+", "a", false),
        ("a/b", "a/b/c", false),
        ("+/+", "#", true),
        ("a/+/c", "+/b/#", true),
    ] {
        assert_eq!(overlaps(a, b), expected, "{a} overlaps {b}");
        assert_eq!(overlaps(b, a), expected, "{b} overlaps {a}");
    }
}

/// Every topic of up to four levels over `x`, `y`, `$s`, the empty level and `z` (a level
/// no filter names, standing for "any other").
fn topics() -> Vec<String> {
    let levels = ["x", "y", "$s", "", "z"];
    let mut all: Vec<String> = levels.iter().map(|l| l.to_string()).collect();
    let mut last = all.clone();
    for _ in 1..4 {
        last = last
            .iter()
            .flat_map(|t| levels.iter().map(move |l| format!("{t}/{l}")))
            .collect();
        all.extend(last.iter().cloned());
    }
    all
}

fn filter() -> impl Strategy<Value = String> {
    let level = prop::sample::select(vec!["x", "y", "$s", "", "+"]);
    (prop::collection::vec(level, 0..3), any::<bool>()).prop_filter_map(
        "a filter has a level",
        |(levels, hash)| {
            let mut levels: Vec<&str> = levels;
            if hash {
                levels.push("#");
            }
            let filter = levels.join("/");
            (!filter.is_empty()).then_some(filter)
        },
    )
}

proptest! {
    #[test]
    fn covering_and_overlapping_agree_with_matching(a in filter(), b in filter()) {
        let topics = topics();
        let of = |f: &str| topics.iter().filter(|t| matches(f, t)).collect::<Vec<_>>();
        let (in_a, in_b) = (of(&a), of(&b));
        prop_assert_eq!(covers(&a, &b), in_b.iter().all(|t| in_a.contains(t)));
        prop_assert_eq!(overlaps(&a, &b), in_b.iter().any(|t| in_a.contains(t)));
    }

    #[test]
    fn a_filtered_subscription_receives_exactly_what_is_not_denied(
        allow in filter(), deny in filter(), sub in filter()
    ) {
        let r = rules(&[(Allow, Subscribe, &allow), (Deny, Subscribe, &deny)]);
        let decision = r.may_subscribe(&sub);
        for t in topics().iter().filter(|t| matches(&sub, t)) {
            match decision {
                Decision::Refused => {}
                Decision::Allowed => {
                    prop_assert!(matches(&allow, t));
                    prop_assert!(!matches(&deny, t));
                    prop_assert!(r.may_receive(t));
                }
                Decision::AllowedFiltered => {
                    prop_assert!(matches(&allow, t));
                    prop_assert_eq!(r.may_receive(t), !matches(&deny, t));
                }
            }
        }
    }
}
