//! Lines of Meteor's controller protocol, parsed the way Meteor parses them:
//! `ADDMESSAGE <channel> <text>` (one whitespace character after the channel; the rest of the
//! line, possibly empty, is the text), `COUNTSUBSCRIBERS <channel>`, `LISTCHANNELS`,
//! `SHOWSTATS` and `QUIT`. Command words are case-sensitive. Anything else is
//! [`Command::Invalid`], answered `ERR Invalid command syntax`.

/// One controller command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command<'a> {
    /// Publish `text` to `channel`.
    AddMessage {
        /// Channel name as given.
        channel: &'a str,
        /// The message text.
        text: &'a str,
    },
    /// How many subscribers `channel` has.
    CountSubscribers {
        /// Channel name as given.
        channel: &'a str,
    },
    /// Every channel with its stored message and subscriber counts.
    ListChannels,
    /// Server statistics.
    ShowStats,
    /// Close the connection.
    Quit,
    /// Not a command.
    Invalid,
}

/// Parses one line (without its line ending).
pub fn parse(line: &str) -> Command<'_> {
    if let Some(rest) = line.strip_prefix("ADDMESSAGE") {
        return add_message(rest).unwrap_or(Command::Invalid);
    }
    if let Some(rest) = line.strip_prefix("COUNTSUBSCRIBERS") {
        let channel = rest.trim_start();
        let ok = rest.len() > channel.len()
            && !channel.is_empty()
            && !channel.contains(char::is_whitespace);
        return if ok {
            Command::CountSubscribers { channel }
        } else {
            Command::Invalid
        };
    }
    if let Some(rest) = line.strip_prefix("LISTCHANNELS") {
        return if rest.is_empty() {
            Command::ListChannels
        } else {
            Command::Invalid
        };
    }
    if line.starts_with("SHOWSTATS") {
        return Command::ShowStats;
    }
    if let Some(rest) = line.strip_prefix("QUIT") {
        return if rest.is_empty() {
            Command::Quit
        } else {
            Command::Invalid
        };
    }
    Command::Invalid
}

/// `\s+(\S+)\s(.*)` after the command word.
fn add_message(rest: &str) -> Option<Command<'_>> {
    let after_space = rest.trim_start();
    if after_space.len() == rest.len() {
        return None;
    }
    let end = after_space.find(char::is_whitespace)?;
    let channel = &after_space[..end];
    if channel.is_empty() {
        return None;
    }
    let sep = after_space[end..].chars().next()?;
    let text = &after_space[end + sep.len_utf8()..];
    Some(Command::AddMessage { channel, text })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn commands() {
        assert_eq!(
            parse("ADDMESSAGE news hello world"),
            Command::AddMessage {
                channel: "news",
                text: "hello world"
            }
        );
        assert_eq!(
            parse("ADDMESSAGE  news  two spaces"),
            Command::AddMessage {
                channel: "news",
                text: " two spaces"
            }
        );
        assert_eq!(
            parse("ADDMESSAGE news "),
            Command::AddMessage {
                channel: "news",
                text: ""
            }
        );
        assert_eq!(
            parse("COUNTSUBSCRIBERS news"),
            Command::CountSubscribers { channel: "news" }
        );
        assert_eq!(parse("LISTCHANNELS"), Command::ListChannels);
        assert_eq!(parse("SHOWSTATS"), Command::ShowStats);
        assert_eq!(parse("QUIT"), Command::Quit);
        for bad in [
            "",
            "ADDMESSAGE",
            "ADDMESSAGE news",
            "ADDMESSAGEnews hi",
            "COUNTSUBSCRIBERS",
            "COUNTSUBSCRIBERS a b",
            "LISTCHANNELS x",
            "QUIT now",
            "addmessage news hi",
            "HELLO",
        ] {
            assert_eq!(parse(bad), Command::Invalid, "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn never_panics(line in "\\PC{0,200}") {
            let _ = parse(&line);
        }

        #[test]
        fn never_panics_after_a_command_word(
            word in "(ADDMESSAGE|COUNTSUBSCRIBERS|LISTCHANNELS|SHOWSTATS|QUIT)",
            rest in "(\\s|\\PC){0,60}",
        ) {
            let _ = parse(&format!("{word}{rest}"));
        }
    }
}
