//! Tests of the tag grammar: parsing, printing, matching, limits and error messages.

use super::*;
use proptest::prelude::*;

fn expr(text: &str) -> TagExpr {
    TagExpr::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

fn error(text: &str) -> String {
    let err = TagExpr::parse(text).expect_err(text);
    assert_eq!(err.code, ErrorCode::TagExpressionInvalid, "{text}");
    err.message
}

#[test]
fn validates_tags() {
    for ok in [
        "sports",
        "uk",
        "a",
        "x-1_2.3:4@5/6",
        "and",
        "Not",
        &"t".repeat(64),
    ] {
        assert!(validate_tag(ok).is_ok(), "{ok}");
    }
    for (bad, why) in [
        ("", "it is empty"),
        (&"t".repeat(65), "longer than 64 bytes"),
        ("sp*rts", "only A-Z"),
        ("a b", "only A-Z"),
        ("a=b", "only A-Z"),
        ("é", "only A-Z"),
        ("AND", "operators"),
        ("NOT", "operators"),
    ] {
        let err = validate_tag(bad).unwrap_err();
        assert_eq!(err.code, ErrorCode::TagInvalid, "{bad}");
        assert!(err.message.contains(why), "{bad}: {}", err.message);
    }
    assert_eq!(
        validate_tag("sp*rts").unwrap_err().message,
        "invalid tag \"sp*rts\": only A-Z a-z 0-9 and _ - . : @ / are allowed"
    );
}

#[test]
fn documented_example() {
    let e = expr("sports AND (uk OR ie) AND NOT muted");
    assert_eq!(e.to_string(), "sports AND (uk OR ie) AND NOT muted");
    assert_eq!(e.tags(), ["ie", "muted", "sports", "uk"]);
    assert!(e.matches_tags(&["sports", "uk"]));
    assert!(e.matches_tags(&["ie", "sports", "news"]));
    assert!(!e.matches_tags(&["sports", "uk", "muted"]));
    assert!(!e.matches_tags(&["sports", "fr"]));
    assert!(!e.matches_tags(&["uk", "ie"]));
    assert!(!e.matches_tags::<&str>(&[]));
    assert!(e.matches(|t| t == "sports" || t == "ie"));
}

#[test]
fn error_codes() {
    assert_eq!(ErrorCode::TagInvalid.as_str(), "tag_invalid");
    assert_eq!(
        ErrorCode::TagExpressionInvalid.as_str(),
        "tag_expression_invalid"
    );
    assert_eq!(ErrorCode::TagInvalid.http_status(), 400);
    assert_eq!(ErrorCode::TagExpressionInvalid.http_status(), 400);
}

#[test]
fn bare_tag_and_lowercase_keywords_are_tags() {
    let e = expr("  news\t");
    assert_eq!(e.to_string(), "news");
    assert!(e.matches_tags(&["news"]));
    assert!(!e.matches_tags(&["News"]));

    let e = expr("and OR not");
    assert_eq!(e.tags(), ["and", "not"]);
    assert!(e.matches_tags(&["not"]));
    assert!(!e.matches_tags(&["NOT"]));
}

#[test]
fn parentheses_need_no_spaces() {
    assert_eq!(expr("(a OR b)AND(c)").to_string(), "(a OR b) AND c");
    assert_eq!(expr("NOT(a)").to_string(), "NOT a");
    assert_eq!(expr("((((a))))"), expr("a"));
}

#[test]
fn precedence() {
    // a OR (b AND c)
    let e = expr("a OR b AND c");
    assert_eq!(e, expr("a OR (b AND c)"));
    assert_ne!(e, expr("(a OR b) AND c"));
    assert_eq!(e.to_string(), "a OR b AND c");
    assert!(e.matches_tags(&["a"]));
    assert!(!e.matches_tags(&["b"]));
    assert!(e.matches_tags(&["b", "c"]));

    // (NOT a) AND b
    let e = expr("NOT a AND b");
    assert_eq!(e, expr("(NOT a) AND b"));
    assert!(e.matches_tags(&["b"]));
    assert!(!e.matches_tags(&["a", "b"]));
    assert!(!e.matches_tags::<&str>(&[]));

    let e = expr("NOT NOT a");
    assert_eq!(e.to_string(), "NOT NOT a");
    assert!(e.matches_tags(&["a"]));
    assert!(!e.matches_tags(&["b"]));

    let e = expr("NOT (a OR b)");
    assert_eq!(e.to_string(), "NOT (a OR b)");
    assert!(e.matches_tags(&["c"]));
    assert!(!e.matches_tags(&["b"]));
}

#[test]
fn left_associative_and_canonical_parentheses() {
    assert_eq!(expr("a AND b AND c"), expr("(a AND b) AND c"));
    assert_ne!(expr("a AND b AND c"), expr("a AND (b AND c)"));
    assert_eq!(expr("a AND (b AND c)").to_string(), "a AND (b AND c)");
    assert_eq!(expr("(a OR b) OR c").to_string(), "a OR b OR c");
    assert_eq!(expr("a OR (b OR c)").to_string(), "a OR (b OR c)");
    assert_eq!(expr("(a AND b) OR c").to_string(), "a AND b OR c");
    assert_eq!(
        expr("(a OR b) AND (c OR d)").to_string(),
        "(a OR b) AND (c OR d)"
    );
}

#[test]
fn tags_are_distinct_and_sorted() {
    assert_eq!(expr("b AND a OR b AND NOT c").tags(), ["a", "b", "c"]);
}

#[test]
fn error_messages() {
    let cases = [
        ("", "empty tag expression"),
        (" \t\n ", "empty tag expression"),
        (
            "sports AND (uk OR ie) AND",
            "tag expression: expected a tag or \"(\" after AND at byte 22, found the end",
        ),
        (
            "sports AND OR uk",
            "tag expression: expected a tag or \"(\" after AND at byte 7, found OR at byte 11",
        ),
        (
            "a AND NOT",
            "tag expression: expected a tag or \"(\" after NOT at byte 6, found the end",
        ),
        (
            "AND a",
            "tag expression: expected a tag, NOT or \"(\" at the start, found AND at byte 0",
        ),
        (
            "()",
            "tag expression: expected a tag or \"(\" after \"(\" at byte 0, found \")\" at byte 1",
        ),
        (
            "sports AND (uk OR ie",
            "tag expression: unclosed \"(\" opened at byte 11",
        ),
        (
            "(a AND (b OR c)",
            "tag expression: unclosed \"(\" opened at byte 0",
        ),
        (
            "sports AND (uk OR ie)) OR x",
            "tag expression: unexpected \")\" at byte 21: no \"(\" is open",
        ),
        (
            ")",
            "tag expression: expected a tag, NOT or \"(\" at the start, found \")\" at byte 0",
        ),
        (
            "sp*rts AND uk",
            "tag expression: \"sp*rts\" at byte 0 is not a tag: only A-Z a-z 0-9 and _ - . : @ / are allowed",
        ),
        (
            "uk OR café",
            "tag expression: \"café\" at byte 6 is not a tag: only A-Z a-z 0-9 and _ - . : @ / are allowed",
        ),
        (
            "sports uk",
            "tag expression: expected AND or OR after \"sports\" at byte 0, found \"uk\" at byte 7",
        ),
        (
            "(sports uk)",
            "tag expression: expected AND, OR or \")\" after \"sports\" at byte 1, found \"uk\" at byte 8",
        ),
        (
            "(a) (b)",
            "tag expression: expected AND or OR after \")\" at byte 2, found \"(\" at byte 4",
        ),
        (
            "sports NOT muted",
            "tag expression: expected AND or OR after \"sports\" at byte 0, found NOT at byte 7 (write AND NOT or OR NOT)",
        ),
        (
            "sports and uk",
            "tag expression: expected AND or OR after \"sports\" at byte 0, found \"and\" at byte 7 (operators are uppercase: AND; \"and\" is a tag)",
        ),
    ];
    for (text, message) in cases {
        assert_eq!(error(text), message, "{text:?}");
    }
    let long_tag = "t".repeat(65);
    assert!(error(&long_tag).contains("is not a tag: it is longer than 64 bytes"));
}

#[test]
fn length_limit() {
    let ok = format!("a{}", " ".repeat(MAX_EXPRESSION_LEN - 1));
    assert!(TagExpr::parse(&ok).is_ok());
    let long = format!("a{}", " ".repeat(MAX_EXPRESSION_LEN));
    assert_eq!(
        error(&long),
        "tag expression is 4097 bytes; at most 4096 are allowed"
    );
}

#[test]
fn depth_limit() {
    let nested = |n: usize| format!("{}a{}", "(".repeat(n), ")".repeat(n));
    assert_eq!(expr(&nested(MAX_DEPTH)), expr("a"));
    assert_eq!(
        error(&nested(MAX_DEPTH + 1)),
        "tag expression: \"(\" at byte 32 nests parentheses deeper than 32 levels"
    );
}

#[test]
fn term_limit() {
    let terms = |n: usize| {
        (0..n)
            .map(|i| format!("t{i}"))
            .collect::<Vec<_>>()
            .join(" OR ")
    };
    let e = expr(&terms(MAX_TERMS));
    assert_eq!(e.tags().len(), MAX_TERMS);
    assert!(e.matches_tags(&["t255"]));
    let message = error(&terms(MAX_TERMS + 1));
    assert!(
        message.starts_with("tag expression: more than 256 tags: \"t256\" at byte "),
        "{message}"
    );
    assert!(message.ends_with(" is tag number 257"), "{message}");
}

#[test]
fn long_not_chain_is_not_recursive() {
    let text = format!("{}a", "NOT ".repeat(1000));
    let e = expr(&text);
    assert_eq!(e.to_string(), text);
    assert!(e.matches_tags(&["a"]));
}

#[test]
fn deepest_evaluation_stack_fits() {
    // Every level leaves an OR and an AND operand pending: the worst case for the stack.
    let mut text = String::from("x");
    for _ in 0..MAX_DEPTH {
        text = format!("a OR b AND ({text})");
    }
    let text = format!("a OR b AND {text}");
    let e = expr(&text);
    assert!(e.matches_tags(&["x", "b"]));
    assert!(!e.matches_tags(&["x"]));
    assert_eq!(expr(&e.to_string()), e);
}

#[test]
fn from_str_and_serde() {
    let e: TagExpr = "sports AND (uk OR ie)".parse().unwrap();
    let json = serde_json::to_string(&e).unwrap();
    assert_eq!(json, "\"sports AND (uk OR ie)\"");
    let back: TagExpr = serde_json::from_str("\"sports AND ( uk OR ie )\"").unwrap();
    assert_eq!(back, e);
    let err = serde_json::from_str::<TagExpr>("\"sports AND\"").unwrap_err();
    assert!(err.to_string().contains("after AND at byte 7"), "{err}");
    assert_eq!(format!("{e:?}"), "TagExpr(\"sports AND (uk OR ie)\")");
}

/// A reference tree, rendered fully parenthesised and evaluated recursively.
#[derive(Debug, Clone)]
enum Tree {
    Tag(&'static str),
    Not(Box<Tree>),
    And(Box<Tree>, Box<Tree>),
    Or(Box<Tree>, Box<Tree>),
}

impl Tree {
    fn render(&self) -> String {
        match self {
            Tree::Tag(t) => t.to_string(),
            Tree::Not(x) => format!("NOT ({})", x.render()),
            Tree::And(l, r) => format!("({}) AND ({})", l.render(), r.render()),
            Tree::Or(l, r) => format!("({})OR({})", l.render(), r.render()),
        }
    }

    fn eval(&self, tags: &[&str]) -> bool {
        match self {
            Tree::Tag(t) => tags.contains(t),
            Tree::Not(x) => !x.eval(tags),
            Tree::And(l, r) => l.eval(tags) && r.eval(tags),
            Tree::Or(l, r) => l.eval(tags) || r.eval(tags),
        }
    }
}

const POOL: [&str; 6] = ["a", "b", "and", "x-1", "u@d/e", "Not"];

fn tree() -> impl Strategy<Value = Tree> {
    let leaf = prop::sample::select(&POOL[..]).prop_map(Tree::Tag);
    leaf.prop_recursive(5, 32, 2, |inner| {
        prop_oneof![
            inner.clone().prop_map(|x| Tree::Not(Box::new(x))),
            (inner.clone(), inner.clone()).prop_map(|(l, r)| Tree::And(Box::new(l), Box::new(r))),
            (inner.clone(), inner).prop_map(|(l, r)| Tree::Or(Box::new(l), Box::new(r))),
        ]
    })
}

proptest! {
    #[test]
    fn display_round_trips_and_evaluates_like_the_tree(
        tree in tree(),
        held in prop::sample::subsequence(&POOL[..], 0..=POOL.len()),
    ) {
        let e = expr(&tree.render());
        let canonical = e.to_string();
        let again = expr(&canonical);
        prop_assert_eq!(&again, &e);
        prop_assert_eq!(again.to_string(), canonical);
        prop_assert_eq!(e.matches_tags(&held), tree.eval(&held));
    }

    #[test]
    fn parse_never_panics(text in ".{0,200}") {
        if let Ok(e) = TagExpr::parse(&text) {
            prop_assert_eq!(expr(&e.to_string()), e.clone());
            let _ = e.matches(|t| t.len() % 2 == 0);
        }
    }

    #[test]
    fn parse_never_panics_on_grammar_soup(
        words in prop::collection::vec(
            prop::sample::select(&["AND", "OR", "NOT", "(", ")", "a", "b", "and", "*", " "][..]),
            0..40,
        ),
    ) {
        let text = words.join(" ");
        if let Ok(e) = TagExpr::parse(&text) {
            prop_assert_eq!(expr(&e.to_string()), e);
        }
    }
}
