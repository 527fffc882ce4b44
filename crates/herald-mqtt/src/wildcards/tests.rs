use super::*;

fn covers(patterns: &[&str], filter: &str) -> bool {
    token_covers(
        &PatternSet::new(patterns),
        &TopicFilter::parse(filter).unwrap(),
    )
}

#[test]
fn every_channel_allowed_covers_every_filter() {
    for f in ["#", "+", "a/+/c", "$SYS/#", "/+"] {
        assert!(covers(&["**"], f), "{f}");
    }
}

#[test]
fn a_filter_needs_its_plain_and_encoded_channels_covered() {
    assert!(
        !covers(&["sensors/*"], "sensors/+"),
        "sensors/living room is =sensors/..."
    );
    assert!(
        !covers(&["=sensors/*"], "sensors/+"),
        "sensors/kitchen is plain"
    );
    assert!(covers(&["sensors/*", "=sensors/*"], "sensors/+"));
    assert!(covers(&["sensors/**", "=sensors/**"], "sensors/+/temp"));
    assert!(!covers(&["sensors/*/temp", "=sensors/*"], "sensors/+/temp"));
    assert!(covers(
        &["sensors/*/temp", "=sensors/*/temp"],
        "sensors/+/temp"
    ));
    assert!(!covers(&["sensors/kitchen", "=sensors/*"], "sensors/+"));
    assert!(!covers(&["sensors/k*", "=sensors/*"], "sensors/+"));
}

#[test]
fn hash_needs_double_star_and_its_parent_level() {
    assert!(
        !covers(&["a/**", "=a/**"], "a/#"),
        "a/# matches the channel a too"
    );
    assert!(covers(&["a", "a/**", "=a/**"], "a/#"));
    assert!(!covers(&["a", "a/*", "=a/*"], "a/#"), "* is one segment");
    assert!(covers(&["a/*", "=a/*", "a", "a/*/**", "=a/*/**"], "a/+/#"));
    assert!(
        !covers(&["a/*/**", "=a/*/**"], "a/+/#"),
        "a/+ must be covered too"
    );
    // A leading wildcard: plain channels need `**` as a whole, encoded ones `=*`-first.
    assert!(!covers(&["*", "=*"], "#"));
    assert!(covers(&["*", "=*"], "+"));
    assert!(
        covers(&["*"], "+"),
        "`*` matches one-level encoded channels too"
    );
    assert!(!covers(&["*"], "+/a"));
}

#[test]
fn literal_levels_that_cannot_be_plain_need_only_the_encoded_pattern() {
    assert!(covers(&["=living=20room/*"], "living room/+"));
    assert!(!covers(&["living room/*"], "living room/+"));
    assert!(
        covers(&["==/*"], "/+"),
        "an empty first level is the segment =="
    );
    assert!(covers(&["==24SYS/**", "==24SYS"], "$SYS/#"));
    // `=x` can be a later segment of a plain channel.
    assert!(!covers(&["==x/*"], "a/=x/+") && !covers(&["=a/=3Dx/*"], "a/=x/+"));
    assert!(covers(&["a/=x/*", "=a/=3Dx/*"], "a/=x/+"));
}
