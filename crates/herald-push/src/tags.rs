//! Device tags and tag expressions: how a push message picks its audience.
//!
//! A **tag** is 1 to 64 bytes of `A-Z a-z 0-9` and `_ - . : @ /`, case-sensitive. The words
//! `AND`, `OR` and `NOT` are operators, so they are not tags (but `and`, `Or`, `not` are).
//!
//! A **tag expression** combines tags:
//!
//! ```text
//! expr    := and ( "OR" and )*
//! and     := unary ( "AND" unary )*
//! unary   := "NOT"* primary
//! primary := TAG | "(" expr ")"
//! ```
//!
//! so `NOT` binds tighter than `AND`, which binds tighter than `OR`, and `AND`/`OR` are
//! left-associative: `sports AND (uk OR ie) AND NOT muted`. Operators are uppercase keywords
//! only; a lowercase `and` is a tag. Tokens are separated by whitespace; parentheses need none.
//! Limits: [`MAX_EXPRESSION_LEN`] bytes of text, [`MAX_DEPTH`] nested parentheses,
//! [`MAX_TERMS`] tag terms. Error messages give 0-based byte offsets into the text.
//!
//! A parsed [`TagExpr`] is kept in postfix form, so [`TagExpr::matches`] is a loop over a flat
//! `Vec` with a small fixed stack: no recursion, no allocation.

use std::fmt;
use std::str::FromStr;

use herald_core::error::{ErrorCode, HeraldError};

/// Longest tag accepted, in bytes.
pub const MAX_TAG_LEN: usize = 64;
/// Longest tag expression accepted, in bytes.
pub const MAX_EXPRESSION_LEN: usize = 4096;
/// Deepest nesting of parentheses accepted in a tag expression.
pub const MAX_DEPTH: usize = 32;
/// Most tag terms (counting repeats) accepted in a tag expression.
pub const MAX_TERMS: usize = 256;

/// Evaluation stack needed by any expression within the limits: each open parenthesis level
/// holds at most a pending `OR` operand and a pending `AND` operand, plus the innermost term.
const EVAL_STACK: usize = 2 * (MAX_DEPTH + 1) + 1;

/// Checks `tag` against the tag grammar: 1 to 64 bytes of `A-Z a-z 0-9 _ - . : @ /`, and not
/// one of the operator words `AND`, `OR`, `NOT`.
pub fn validate_tag(tag: &str) -> Result<(), HeraldError> {
    match tag_problem(tag) {
        None => Ok(()),
        Some(why) => Err(HeraldError::new(
            ErrorCode::TagInvalid,
            format!("invalid tag {:?}: {why}", shorten(tag)),
        )),
    }
}

fn tag_problem(tag: &str) -> Option<&'static str> {
    if tag.is_empty() {
        Some("it is empty")
    } else if tag.len() > MAX_TAG_LEN {
        Some("it is longer than 64 bytes")
    } else if !tag.bytes().all(is_tag_byte) {
        Some("only A-Z a-z 0-9 and _ - . : @ / are allowed")
    } else if matches!(tag, "AND" | "OR" | "NOT") {
        Some("AND, OR and NOT are operators, not tags")
    } else {
        None
    }
}

fn is_keyword_ignoring_case(word: &str) -> bool {
    ["AND", "OR", "NOT"]
        .iter()
        .any(|k| word.eq_ignore_ascii_case(k))
}

fn is_tag_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':' | b'@' | b'/')
}

/// At most 64 characters of `text`, for error messages.
fn shorten(text: &str) -> String {
    text.chars().take(64).collect()
}

/// A parsed tag expression, e.g. `sports AND (uk OR ie) AND NOT muted`.
///
/// Equality is structural: `a AND b` and `b AND a` differ. [`Display`](fmt::Display) prints the
/// canonical form (single spaces, only the parentheses precedence needs), which parses back to
/// an equal expression. Serialized as that string.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TagExpr {
    /// Postfix program; always a single well-formed expression.
    ops: Vec<Op>,
}

#[derive(Clone, PartialEq, Eq, Hash)]
enum Op {
    Tag(Box<str>),
    Not,
    And,
    Or,
}

impl TagExpr {
    /// Parses `text` (see the [module docs](self) for the grammar). Errors are
    /// `tag_expression_invalid` and say what was expected and at which byte.
    pub fn parse(text: &str) -> Result<TagExpr, HeraldError> {
        parse(text).map_err(|message| HeraldError::new(ErrorCode::TagExpressionInvalid, message))
    }

    /// True when the expression holds for a device, where `has(tag)` says whether the device
    /// holds `tag`. `has` is called once per tag term; nothing recurses or allocates.
    pub fn matches(&self, has: impl Fn(&str) -> bool) -> bool {
        let mut stack = [false; EVAL_STACK];
        let mut len = 0;
        for op in &self.ops {
            match op {
                Op::Tag(tag) => {
                    stack[len] = has(tag);
                    len += 1;
                }
                Op::Not => stack[len - 1] = !stack[len - 1],
                Op::And => {
                    len -= 1;
                    stack[len - 1] &= stack[len];
                }
                Op::Or => {
                    len -= 1;
                    stack[len - 1] |= stack[len];
                }
            }
        }
        stack[0]
    }

    /// True when a device holding exactly `tags` matches.
    pub fn matches_tags<S: AsRef<str>>(&self, tags: &[S]) -> bool {
        self.matches(|tag| tags.iter().any(|t| t.as_ref() == tag))
    }

    /// Every distinct tag the expression names, sorted.
    pub fn tags(&self) -> Vec<&str> {
        let mut tags: Vec<&str> = self
            .ops
            .iter()
            .filter_map(|op| match op {
                Op::Tag(tag) => Some(&**tag),
                _ => None,
            })
            .collect();
        tags.sort_unstable();
        tags.dedup();
        tags
    }
}

impl FromStr for TagExpr {
    type Err = HeraldError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        TagExpr::parse(text)
    }
}

/// Binding strength of a printed subexpression.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Prec {
    Or,
    And,
    /// A tag, a `NOT`, or anything in parentheses.
    Atom,
}

impl fmt::Display for TagExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Rebuild the text from the postfix program with a stack: no recursion.
        fn wrap(text: String, paren: bool) -> String {
            if paren {
                format!("({text})")
            } else {
                text
            }
        }
        let mut stack: Vec<(String, Prec)> = Vec::new();
        for op in &self.ops {
            let entry = match op {
                Op::Tag(tag) => (tag.to_string(), Prec::Atom),
                Op::Not => {
                    let (text, prec) = stack.pop().expect("well-formed program");
                    (format!("NOT {}", wrap(text, prec < Prec::Atom)), Prec::Atom)
                }
                Op::And | Op::Or => {
                    let (right, right_prec) = stack.pop().expect("well-formed program");
                    let (left, left_prec) = stack.pop().expect("well-formed program");
                    let (word, prec) = match op {
                        Op::And => (" AND ", Prec::And),
                        _ => (" OR ", Prec::Or),
                    };
                    // Left-associative: the left side needs parentheses only when it binds
                    // more loosely, the right side also when it binds equally.
                    let mut text = wrap(left, left_prec < prec);
                    text.push_str(word);
                    text.push_str(&wrap(right, right_prec <= prec));
                    (text, prec)
                }
            };
            stack.push(entry);
        }
        let (text, _) = stack.pop().expect("well-formed program");
        f.write_str(&text)
    }
}

impl fmt::Debug for TagExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("TagExpr").field(&self.to_string()).finish()
    }
}

impl serde::Serialize for TagExpr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for TagExpr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        TagExpr::parse(&text).map_err(|e| serde::de::Error::custom(e.message))
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Tok<'a> {
    And,
    Or,
    Not,
    Open,
    Close,
    Word(&'a str),
}

#[derive(Clone, Copy)]
struct Token<'a> {
    tok: Tok<'a>,
    /// Byte offset in the text.
    at: usize,
}

impl Token<'_> {
    /// How an error message names this token: `AND`, `"("`, `"sports" at byte 4`.
    fn describe(&self) -> String {
        let what = match self.tok {
            Tok::And => "AND".to_string(),
            Tok::Or => "OR".to_string(),
            Tok::Not => "NOT".to_string(),
            Tok::Open => "\"(\"".to_string(),
            Tok::Close => "\")\"".to_string(),
            Tok::Word(word) => format!("{:?}", shorten(word)),
        };
        format!("{what} at byte {}", self.at)
    }
}

fn tokenize(text: &str) -> Vec<Token<'_>> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let at = i;
        let tok = match bytes[i] {
            b if b.is_ascii_whitespace() => {
                i += 1;
                continue;
            }
            b'(' => {
                i += 1;
                Tok::Open
            }
            b')' => {
                i += 1;
                Tok::Close
            }
            _ => {
                while i < bytes.len()
                    && !bytes[i].is_ascii_whitespace()
                    && !matches!(bytes[i], b'(' | b')')
                {
                    i += 1;
                }
                // `i` stops at an ASCII byte or the end, so this is a char boundary.
                match &text[at..i] {
                    "AND" => Tok::And,
                    "OR" => Tok::Or,
                    "NOT" => Tok::Not,
                    word => Tok::Word(word),
                }
            }
        };
        tokens.push(Token { tok, at });
    }
    tokens
}

fn parse(text: &str) -> Result<TagExpr, String> {
    if text.len() > MAX_EXPRESSION_LEN {
        return Err(format!(
            "tag expression is {} bytes; at most {MAX_EXPRESSION_LEN} are allowed",
            text.len()
        ));
    }
    let tokens = tokenize(text);
    if tokens.is_empty() {
        return Err("empty tag expression".to_string());
    }
    let mut parser = Parser {
        tokens,
        pos: 0,
        ops: Vec::new(),
        terms: 0,
        open: Vec::new(),
    };
    parser
        .expr()
        .map_err(|why| format!("tag expression: {why}"))?;
    Ok(TagExpr { ops: parser.ops })
}

/// Recursive descent; recursion is bounded by [`MAX_DEPTH`] parentheses, and `NOT` chains and
/// `AND`/`OR` chains are loops.
struct Parser<'a> {
    tokens: Vec<Token<'a>>,
    /// Index of the next token.
    pos: usize,
    /// The postfix program so far.
    ops: Vec<Op>,
    /// Tag terms seen so far.
    terms: usize,
    /// Byte offsets of the `(`s currently open, innermost last.
    open: Vec<usize>,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<Token<'a>> {
        self.tokens.get(self.pos).copied()
    }

    /// `expr := and ("OR" and)*`, then checks that the next token may end it: the end of the
    /// text at top level, `)` inside parentheses (left for the caller to take).
    fn expr(&mut self) -> Result<(), String> {
        self.and()?;
        loop {
            match self.peek() {
                Some(Token { tok: Tok::Or, .. }) => {
                    self.pos += 1;
                    self.and()?;
                    self.ops.push(Op::Or);
                }
                None => {
                    return match self.open.last() {
                        Some(at) => Err(format!("unclosed \"(\" opened at byte {at}")),
                        None => Ok(()),
                    }
                }
                Some(Token {
                    tok: Tok::Close,
                    at,
                }) => {
                    return if self.open.is_empty() {
                        Err(format!("unexpected \")\" at byte {at}: no \"(\" is open"))
                    } else {
                        Ok(())
                    };
                }
                Some(found) => return Err(self.expected_operator(found)),
            }
        }
    }

    /// `and := unary ("AND" unary)*`
    fn and(&mut self) -> Result<(), String> {
        self.unary()?;
        while let Some(Token { tok: Tok::And, .. }) = self.peek() {
            self.pos += 1;
            self.unary()?;
            self.ops.push(Op::And);
        }
        Ok(())
    }

    /// `unary := "NOT"* primary`; `primary := TAG | "(" expr ")"`
    fn unary(&mut self) -> Result<(), String> {
        let mut nots = 0;
        while let Some(Token { tok: Tok::Not, .. }) = self.peek() {
            self.pos += 1;
            nots += 1;
        }
        match self.peek() {
            Some(Token {
                tok: Tok::Word(word),
                at,
            }) => {
                self.pos += 1;
                self.terms += 1;
                if self.terms > MAX_TERMS {
                    return Err(format!(
                        "more than {MAX_TERMS} tags: {:?} at byte {at} is tag number {}",
                        shorten(word),
                        self.terms
                    ));
                }
                if let Some(why) = tag_problem(word) {
                    return Err(format!(
                        "{:?} at byte {at} is not a tag: {why}",
                        shorten(word)
                    ));
                }
                self.ops.push(Op::Tag(word.into()));
            }
            Some(Token { tok: Tok::Open, at }) => {
                if self.open.len() == MAX_DEPTH {
                    return Err(format!(
                        "\"(\" at byte {at} nests parentheses deeper than {MAX_DEPTH} levels"
                    ));
                }
                self.pos += 1;
                self.open.push(at);
                self.expr()?;
                // `expr` returned inside parentheses, so the next token is `)`.
                self.pos += 1;
                self.open.pop();
            }
            found => return Err(self.expected_operand(found)),
        }
        self.ops.extend(std::iter::repeat_n(Op::Not, nots));
        Ok(())
    }

    /// A tag or `(` was due but `found` came.
    fn expected_operand(&self, found: Option<Token<'_>>) -> String {
        let found = found.map_or("the end".to_string(), |t| t.describe());
        match self.pos.checked_sub(1).map(|i| self.tokens[i]) {
            Some(prev) => format!(
                "expected a tag or \"(\" after {}, found {found}",
                prev.describe()
            ),
            None => format!("expected a tag, NOT or \"(\" at the start, found {found}"),
        }
    }

    /// An operator (or `)`) was due after a complete operand, but `found` came.
    fn expected_operator(&self, found: Token<'_>) -> String {
        let wanted = if self.open.is_empty() {
            "AND or OR"
        } else {
            "AND, OR or \")\""
        };
        let prev = self.tokens[self.pos - 1].describe();
        let hint = match found.tok {
            Tok::Not => " (write AND NOT or OR NOT)".to_string(),
            Tok::Word(word) if is_keyword_ignoring_case(word) => format!(
                " (operators are uppercase: {}; {word:?} is a tag)",
                word.to_ascii_uppercase()
            ),
            _ => String::new(),
        };
        format!(
            "expected {wanted} after {prev}, found {}{hint}",
            found.describe()
        )
    }
}

#[cfg(test)]
mod tests;
