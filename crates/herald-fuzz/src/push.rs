//! `herald-push`'s tag expressions: a parsed expression prints (canonical form) to a text that
//! parses to the same expression and prints the same, and evaluates against any tag set.

use herald_push::tags::TagExpr;

/// A tag expression, as a publisher sends it in a push's audience.
pub fn tag_expr(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(expr) = TagExpr::parse(text) else {
        return;
    };
    let printed = expr.to_string();
    let again = TagExpr::parse(&printed)
        .unwrap_or_else(|e| panic!("canonical form {printed:?} does not parse: {e:?}"));
    assert_eq!(again, expr, "{text:?} printed as {printed:?}");
    assert_eq!(again.to_string(), printed);
    let tags = expr.tags();
    let some: Vec<&str> = tags.iter().step_by(2).copied().collect();
    let _ = expr.matches_tags(&some);
    let _ = expr.matches(|_| true);
    let _ = expr.matches(|_| false);
}
