//! Meteor templates: text with `~name~` placeholders (`~~` is a literal `~`), parsed once when
//! the configuration is read and rendered into a connection's write buffer. A placeholder the
//! template's context does not know renders as nothing, as in Meteor; a `~` with no closing `~`
//! is literal text.

/// A placeholder's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Var {
    /// `~~`: a literal `~`.
    Tilde,
    /// `~id~`: the message id (Herald's seq).
    Id,
    /// `~channel~`: the channel's Meteor name (also accepted in channel-info templates).
    Channel,
    /// `~text~`: the message text.
    Text,
    /// `~timestamp~`: when the message was stored, Unix seconds.
    Timestamp,
    /// `~status~`: the HTTP status of a header (`200 OK`, `404 Not Found`).
    Status,
    /// `~server~`: the server's name.
    Server,
    /// `~servertime~`: now, Unix seconds.
    ServerTime,
    /// `~channelinfo~`: one channel-info line per subscribed channel.
    ChannelInfo,
    /// `~name~`: the channel's Meteor name in a channel-info template.
    Name,
    /// `~lastMsgID~`: the channel's newest id when the subscriber connected.
    LastMsgId,
    /// `~messageCount~`, `~subscriberCount~` and anything else: rendered by context or empty.
    Other(OtherVar),
}

/// Placeholders only some contexts fill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtherVar {
    /// `~messageCount~`.
    MessageCount,
    /// `~subscriberCount~`.
    SubscriberCount,
    /// Any name Meteor does not define: always empty.
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(Vec<u8>),
    Var(Var),
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Template {
    pieces: Vec<Piece>,
}

fn var(name: &[u8]) -> Var {
    match name {
        b"" => Var::Tilde,
        b"id" => Var::Id,
        b"channel" => Var::Channel,
        b"text" => Var::Text,
        b"timestamp" => Var::Timestamp,
        b"status" => Var::Status,
        b"server" => Var::Server,
        b"servertime" => Var::ServerTime,
        b"channelinfo" => Var::ChannelInfo,
        b"name" => Var::Name,
        b"lastMsgID" => Var::LastMsgId,
        b"messageCount" => Var::Other(OtherVar::MessageCount),
        b"subscriberCount" => Var::Other(OtherVar::SubscriberCount),
        _ => Var::Other(OtherVar::Unknown),
    }
}

impl Template {
    /// Parses template text (escapes already resolved).
    pub fn parse(text: &[u8]) -> Template {
        let mut pieces = Vec::new();
        let mut literal = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.iter().position(|&b| b == b'~') {
            let after = &rest[open + 1..];
            let Some(close) = after.iter().position(|&b| b == b'~') else {
                break;
            };
            literal.extend_from_slice(&rest[..open]);
            match var(&after[..close]) {
                Var::Tilde => literal.push(b'~'),
                v => {
                    if !literal.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut literal)));
                    }
                    pieces.push(Piece::Var(v));
                }
            }
            rest = &after[close + 1..];
        }
        literal.extend_from_slice(rest);
        if !literal.is_empty() {
            pieces.push(Piece::Text(literal));
        }
        Template { pieces }
    }

    /// Whether the template renders nothing at all.
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// Appends the template to `out`, asking `fill` for every placeholder.
    pub fn render(&self, out: &mut Vec<u8>, mut fill: impl FnMut(Var, &mut Vec<u8>)) {
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => out.extend_from_slice(t),
                Piece::Var(v) => fill(*v, out),
            }
        }
    }
}

/// Appends a number in decimal.
pub fn put_number(out: &mut Vec<u8>, n: impl std::fmt::Display) {
    use std::io::Write;
    let _ = write!(out, "{n}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn render(t: &str) -> String {
        let mut out = Vec::new();
        Template::parse(t.as_bytes()).render(&mut out, |v, out| match v {
            Var::Id => out.extend_from_slice(b"7"),
            Var::Channel => out.extend_from_slice(b"news"),
            Var::Text => out.extend_from_slice(b"hi"),
            _ => {}
        });
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn fills_known_names_and_drops_unknown_ones() {
        assert_eq!(
            render("m.p.<~id~>.\"~channel~\".\"{[~text~]}\"\r\n"),
            "m.p.<7>.\"news\".\"{[hi]}\"\r\n"
        );
        assert_eq!(render("a~~b~nope~c"), "a~bc");
        assert_eq!(render("x ~ y"), "x ~ y", "an unclosed ~ is literal");
        assert_eq!(render(""), "");
        assert!(Template::parse(b"").is_empty());
    }

    proptest! {
        #[test]
        fn never_panics(t in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut out = Vec::new();
            Template::parse(&t).render(&mut out, |_, out| out.push(b'!'));
        }

        #[test]
        fn text_without_tilde_is_unchanged(t in "[^~]{0,100}") {
            prop_assert_eq!(render(&t), t);
        }
    }
}
