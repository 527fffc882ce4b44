//! A Meteor configuration as Meteor reads it: `Key value` lines, `[mode]` sections whose keys
//! override the global ones for that mode, `#` comments, and `\r \n \t \s \0` escapes in values.
//! [`MeteorConf::from_file_text`] reads an operator's `meteord.conf` over Meteor's built-in
//! defaults; [`MeteorConf::builtin`] is what Meteor does with the `meteord.conf` it ships
//! (`builtin-modes.conf`). Only the sections of the file are modes; a request for any other mode
//! gets the protocol's error.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::template::Template;

/// Meteor's built-in value of every key whose default Herald uses, in the file's own syntax.
const CORE_DEFAULTS: &[(&str, &str)] = &[
    (
        "ChannelInfoTemplate",
        r#"<script>ch("~name~", ~lastMsgID~);</script>\r\n"#,
    ),
    ("DirectoryIndex", "index.html"),
    (
        "HeaderTemplate",
        r"HTTP/1.1 ~status~\r\nServer: ~server~\r\nContent-Type: text/html; charset=utf-8\r\nPragma: no-cache\r\nCache-Control: no-cache, no-store, must-revalidate\r\nExpires: Thu, 1 Jan 1970 00:00:00 GMT\r\n\r\n",
    ),
    ("MaxMessages", "0"),
    ("MaxTime", "0"),
    (
        "MessageTemplate",
        r#"<script>p(~id~,"~channel~","~text~");</script>\r\n"#,
    ),
    ("PingInterval", "5"),
    ("Persist", "0"),
    ("PingMessage", r#"<script>p(-1,"");</script>\r\n"#),
    ("SubscriberShutdownMsg", r"<script>eof();</script>\r\n"),
    ("SubscriberDynamicPageAddress", "/push"),
    ("ControllerShutdownMsg", ""),
];

/// Keys Meteor knows that Herald accepts and does not use (addresses and ports come from
/// Herald's own settings; logging is Herald's).
const IGNORED_KEYS: &[&str] = &[
    "ControllerIP",
    "ControllerPort",
    "Debug",
    "LogTimeFormat",
    "SubscriberIP",
    "SubscriberPort",
    "SyslogFacility",
    "UDPIP",
    "UDPPort",
];

/// Keys read only from the file (no default applies in Herald). `TextEscape` is Herald's own:
/// how a mode's `~text~` is escaped (see [`TextEscape`]).
const FILE_ONLY_KEYS: &[&str] = &[
    "MaxMessagesPerChannel",
    "MaxMessageAge",
    "SubscriberDocumentRoot",
    "TextEscape",
];

/// The built-in modes (Meteor's shipped meteord.conf).
const BUILTIN_MODES: &str = include_str!("builtin-modes.conf");

/// A configuration file Herald cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ConfError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// How a mode's `~text~` is escaped: the `TextEscape` key (`javascript` or `none`), by default
/// `javascript` when the mode's `MessageTemplate` holds a `<script` element (Meteor's HTML modes
/// put the text in a JavaScript string there) and `none` otherwise (Deacon's lines, Flash).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextEscape {
    /// As it is.
    None,
    /// The body of a JavaScript string literal inside an HTML `<script>` element.
    JavaScript,
}

/// One mode's templates and limits.
#[derive(Debug, Clone)]
pub struct Mode {
    /// The mode's name as clients send it.
    pub name: String,
    /// Written first: the HTTP head (or whatever the mode needs) with `~channelinfo~`.
    pub header: Template,
    /// One per message.
    pub message: Template,
    /// One per subscribed channel inside `~channelinfo~`.
    pub channel_info: Template,
    /// Written every ping interval to persistent connections.
    pub ping: Template,
    /// Written when the server closes the connection (shutdown, replaced, disconnected).
    pub shutdown: Template,
    /// Keep the connection open for live messages (otherwise answer with the replay and close).
    pub persist: bool,
    /// Close after this many messages (0 = never).
    pub max_messages: u64,
    /// Close after this long (zero = never).
    pub max_time: Duration,
    /// How `~text~` is escaped in `message`.
    pub text_escape: TextEscape,
}

/// The effective Meteor configuration.
#[derive(Debug, Clone)]
pub struct MeteorConf {
    /// Modes by name.
    pub modes: HashMap<String, Arc<Mode>>,
    /// The global templates: what errors and `/disconnect` answers are written with.
    pub global: Arc<Mode>,
    /// How often persistent connections get the ping message (zero = never).
    pub ping_interval: Duration,
    /// Where subscribe requests live (`/push`).
    pub push_prefix: String,
    /// File served for a directory of the document root.
    pub directory_index: String,
    /// Sent to controller connections when the server shuts down (empty = nothing).
    pub controller_shutdown: Vec<u8>,
    /// `SubscriberDocumentRoot`, when the file sets it.
    pub document_root: Option<String>,
    /// `MaxMessagesPerChannel`, when the file sets it.
    pub max_messages_per_channel: Option<u64>,
    /// `MaxMessageAge` in seconds, when the file sets it.
    pub max_message_age: Option<u64>,
    /// Keys that were read and are not used, for a startup note.
    pub ignored: Vec<String>,
}

/// A section's values by key, each with the line it came from (0 for a built-in default).
type Keys = HashMap<String, (Vec<u8>, usize)>;

/// Values by key for the global part and each section, in file order.
#[derive(Default)]
struct Raw {
    global: Keys,
    sections: Vec<(String, Keys)>,
}

/// Resolves Meteor's backslash escapes.
pub fn unescape(value: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len());
    let mut bytes = value.bytes();
    while let Some(b) = bytes.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        match bytes.next() {
            Some(b'r') => out.push(b'\r'),
            Some(b'n') => out.push(b'\n'),
            Some(b's') => out.push(b' '),
            Some(b't') => out.push(b'\t'),
            Some(b'0') => out.push(0),
            Some(other) => out.push(other),
            None => out.push(b'\\'),
        }
    }
    out
}

fn is_known(key: &str) -> bool {
    CORE_DEFAULTS.iter().any(|(k, _)| *k == key)
        || IGNORED_KEYS.contains(&key)
        || FILE_ONLY_KEYS.contains(&key)
}

impl Raw {
    /// Reads file text into `self`, later values overriding earlier ones.
    fn read(&mut self, text: &str) -> Result<(), ConfError> {
        let mut section: Option<usize> = None;
        for (i, line) in text.split('\n').enumerate() {
            let line_no = i + 1;
            let line = line.trim_end_matches(['\r', '\n']);
            let trimmed = line.trim_start();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            if let Some(name) = section_name(trimmed) {
                section = Some(match self.sections.iter().position(|(n, _)| n == name) {
                    Some(at) => at,
                    None => {
                        self.sections.push((name.to_owned(), HashMap::new()));
                        self.sections.len() - 1
                    }
                });
                continue;
            }
            let (key, value) = match line.split_once(|c: char| c.is_whitespace()) {
                Some((k, v)) => (k, v.trim_start()),
                None => (line, ""),
            };
            if key == "ConfigFileLocation" || key == "Help" {
                return Err(ConfError {
                    line: line_no,
                    message: format!("{key} is not allowed in a configuration file"),
                });
            }
            if !is_known(key) {
                return Err(ConfError {
                    line: line_no,
                    message: format!("unknown Meteor configuration key {:?}", truncate(key)),
                });
            }
            // Meteor turns a leading "--" into "-" (a command-line quirk it applies to files).
            let value = match value.strip_prefix("--") {
                Some(rest) => format!("-{rest}"),
                None => value.to_owned(),
            };
            let entry = (key.to_owned(), (unescape(&value), line_no));
            match section {
                Some(at) => self.sections[at].1.insert(entry.0, entry.1),
                None => self.global.insert(entry.0, entry.1),
            };
        }
        Ok(())
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(64).collect()
}

/// `[name]` with optional spaces inside the brackets; the name has no spaces or `]`.
fn section_name(line: &str) -> Option<&str> {
    let inner = line.trim_end().strip_prefix('[')?.strip_suffix(']')?.trim();
    (!inner.is_empty() && !inner.contains(|c: char| c.is_whitespace() || c == ']')).then_some(inner)
}

/// A whole number value.
fn number(key: &str, value: &(Vec<u8>, usize)) -> Result<u64, ConfError> {
    let text = String::from_utf8_lossy(&value.0);
    let t = text.trim();
    if t.is_empty() {
        return Ok(0);
    }
    t.parse().map_err(|_| ConfError {
        line: value.1,
        message: format!("{key} must be a whole number, got {:?}", truncate(t)),
    })
}

impl MeteorConf {
    /// What Meteor does with its shipped meteord.conf.
    pub fn builtin() -> MeteorConf {
        Self::from_file_text(BUILTIN_MODES).expect("the built-in modes parse")
    }

    /// An operator's meteord.conf over Meteor's built-in defaults.
    pub fn from_file_text(text: &str) -> Result<MeteorConf, ConfError> {
        let mut raw = Raw::default();
        for (key, value) in CORE_DEFAULTS {
            raw.global.insert((*key).to_owned(), (unescape(value), 0));
        }
        raw.read(text)?;
        let global = build_mode("", &raw.global, &HashMap::new())?;
        let mut modes = HashMap::new();
        for (name, keys) in &raw.sections {
            modes.insert(name.clone(), Arc::new(build_mode(name, &raw.global, keys)?));
        }
        let text_of = |key: &str| {
            raw.global
                .get(key)
                .map(|(v, _)| String::from_utf8_lossy(v).into_owned())
        };
        let optional_number = |key: &str| raw.global.get(key).map(|v| number(key, v)).transpose();
        let ping = number("PingInterval", &raw.global["PingInterval"])?;
        let mut ignored: Vec<String> = raw
            .global
            .keys()
            .chain(raw.sections.iter().flat_map(|(_, keys)| keys.keys()))
            .filter(|k| IGNORED_KEYS.contains(&k.as_str()))
            .cloned()
            .collect();
        ignored.sort();
        ignored.dedup();
        Ok(MeteorConf {
            modes,
            global: Arc::new(global),
            ping_interval: Duration::from_secs(ping),
            push_prefix: text_of("SubscriberDynamicPageAddress")
                .unwrap_or_default()
                .trim_end_matches('/')
                .to_owned(),
            directory_index: text_of("DirectoryIndex").unwrap_or_default(),
            controller_shutdown: raw.global["ControllerShutdownMsg"].0.clone(),
            document_root: text_of("SubscriberDocumentRoot").filter(|r| !r.is_empty()),
            max_messages_per_channel: optional_number("MaxMessagesPerChannel")?,
            max_message_age: optional_number("MaxMessageAge")?,
            ignored,
        })
    }

    /// The mode a client asked for.
    pub fn mode(&self, name: &str) -> Option<&Arc<Mode>> {
        self.modes.get(name)
    }
}

/// A mode from its section's keys, falling back to the global ones.
fn build_mode(name: &str, global: &Keys, section: &Keys) -> Result<Mode, ConfError> {
    let get = |key: &str| section.get(key).or_else(|| global.get(key));
    let template = |key: &str| Template::parse(get(key).map_or(&[][..], |(v, _)| v));
    let num = |key: &str| get(key).map_or(Ok(0), |v| number(key, v));
    let message = template("MessageTemplate");
    let text_escape = match get("TextEscape") {
        Some((v, _)) if v.as_slice() == b"javascript" => TextEscape::JavaScript,
        Some((v, _)) if v.as_slice() == b"none" => TextEscape::None,
        Some((v, line)) if !v.is_empty() => {
            return Err(ConfError {
                line: *line,
                message: format!(
                    "TextEscape must be javascript or none, got {:?}",
                    truncate(&String::from_utf8_lossy(v))
                ),
            })
        }
        _ => {
            let raw = get("MessageTemplate").map_or(&[][..], |(v, _)| v.as_slice());
            let lower = raw.to_ascii_lowercase();
            if lower.windows(7).any(|w| w == b"<script") {
                TextEscape::JavaScript
            } else {
                TextEscape::None
            }
        }
    };
    Ok(Mode {
        name: name.to_owned(),
        header: template("HeaderTemplate"),
        message,
        channel_info: template("ChannelInfoTemplate"),
        ping: template("PingMessage"),
        shutdown: template("SubscriberShutdownMsg"),
        persist: match get("Persist") {
            None => false,
            Some((v, line)) => match v.as_slice() {
                b"" | b"0" => false,
                b"1" => true,
                other => {
                    return Err(ConfError {
                        line: *line,
                        message: format!(
                            "Persist must be 0 or 1, got {:?} (Meteor read any other text as \
                             true; write 1 if that is what you mean)",
                            truncate(&String::from_utf8_lossy(other))
                        ),
                    })
                }
            },
        },
        max_messages: num("MaxMessages")?,
        max_time: Duration::from_secs(num("MaxTime")?),
        text_escape,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn persist_is_0_or_1() {
        let on = MeteorConf::from_file_text("Persist 1\n").unwrap();
        assert!(on.global.persist);
        let off = MeteorConf::from_file_text("Persist 0\n").unwrap();
        assert!(!off.global.persist);
        let e = MeteorConf::from_file_text("\nPersist maybe\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(
            e.message.contains("Persist must be 0 or 1, got \"maybe\""),
            "{}",
            e.message
        );
    }

    fn render(t: &Template) -> String {
        let mut out = Vec::new();
        t.render(&mut out, |_, _| {});
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn builtin_modes_are_meteors_shipped_ones() {
        let c = MeteorConf::builtin();
        for m in [
            "iframe",
            "xhrinteractive",
            "stream",
            "simplepoll",
            "smartpoll",
            "longpoll",
            "flash",
            "flashloadvars",
        ] {
            assert!(c.mode(m).is_some(), "{m}");
        }
        let lp = c.mode("longpoll").unwrap();
        assert!(lp.persist);
        assert_eq!(lp.max_messages, 1);
        assert_eq!(lp.max_time, Duration::from_secs(240));
        assert!(!c.mode("simplepoll").unwrap().persist);
        assert_eq!(c.ping_interval, Duration::from_secs(3));
        assert_eq!(c.push_prefix, "/push");
        assert_eq!(render(&c.mode("flash").unwrap().ping), ".\0");
        assert_eq!(
            render(&c.mode("stream").unwrap().shutdown),
            "<script>eof();</script>\r\n"
        );
        assert!(c.mode("unknown").is_none());
        assert_eq!(c.document_root, None);
    }

    #[test]
    fn deacon_conf_replaces_longpoll_and_keeps_globals() {
        let text = "# Deacon\r\nPingInterval 20\r\nMaxMessagesPerChannel 10\r\n\
                    SubscriberPort 4670\r\n[longpoll]\r\n\
                    HeaderTemplate HTTP/1.1 ~status~\\r\\nChannel(~channelinfo~)\\r\\n\r\n\
                    MessageTemplate m.p.<~id~>.\"~channel~\".\"{[~text~]}\"\\r\\n\r\n\
                    ChannelInfoTemplate \"~channel~\".~lastMsgID~\r\n\
                    PingMessage m.p\\r\\n\r\nSubscriberShutdownMsg m.sd\\r\\n\r\n\
                    Persist 1\r\nMaxMessages 1\r\n";
        let c = MeteorConf::from_file_text(text).unwrap();
        assert_eq!(c.modes.len(), 1, "only the file's sections are modes");
        let lp = c.mode("longpoll").unwrap();
        assert_eq!(render(&lp.ping), "m.p\r\n");
        assert_eq!(render(&lp.shutdown), "m.sd\r\n");
        assert_eq!((lp.persist, lp.max_messages), (true, 1));
        assert_eq!(lp.max_time, Duration::ZERO, "Meteor's MaxTime default");
        assert_eq!(c.ping_interval, Duration::from_secs(20));
        assert_eq!(c.max_messages_per_channel, Some(10));
        assert_eq!(c.max_message_age, None);
        assert_eq!(c.ignored, vec!["SubscriberPort".to_string()]);
    }

    #[test]
    fn html_modes_escape_text_for_javascript_and_the_others_do_not() {
        let c = MeteorConf::builtin();
        for m in [
            "iframe",
            "xhrinteractive",
            "stream",
            "simplepoll",
            "smartpoll",
            "longpoll",
        ] {
            assert_eq!(
                c.mode(m).unwrap().text_escape,
                TextEscape::JavaScript,
                "{m}"
            );
        }
        for m in ["flash", "flashloadvars"] {
            assert_eq!(c.mode(m).unwrap().text_escape, TextEscape::None, "{m}");
        }
        let text = "[a]\nMessageTemplate m.p.<~id~>.\"~text~\"\n[b]\nTextEscape javascript\n\
                    MessageTemplate p(\"~text~\")\n[c]\nTextEscape none\n";
        let c = MeteorConf::from_file_text(text).unwrap();
        assert_eq!(c.mode("a").unwrap().text_escape, TextEscape::None);
        assert_eq!(c.mode("b").unwrap().text_escape, TextEscape::JavaScript);
        assert_eq!(c.mode("c").unwrap().text_escape, TextEscape::None);
        let e = MeteorConf::from_file_text("[a]\nTextEscape html\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("TextEscape must be"), "{e}");
    }

    #[test]
    fn errors_name_the_line() {
        let e = MeteorConf::from_file_text("Persist 1\nBogus 2\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("Bogus"), "{e}");
        let e = MeteorConf::from_file_text("[a]\nMaxMessages lots\n").unwrap_err();
        assert_eq!(e.line, 2);
        let e = MeteorConf::from_file_text("ConfigFileLocation /x\n").unwrap_err();
        assert!(e.message.contains("not allowed"), "{e}");
    }

    #[test]
    fn escapes() {
        assert_eq!(unescape(r"a\r\n\t\s\0\\\x"), b"a\r\n\t \0\\x");
        assert_eq!(unescape("end\\"), b"end\\");
    }

    proptest! {
        #[test]
        fn never_panics(text in "(\\PC|\r|\n|\\[|\\]|\\\\){0,400}") {
            let _ = MeteorConf::from_file_text(&text);
        }

        #[test]
        fn arbitrary_lines_of_known_keys_never_panic(
            lines in proptest::collection::vec(
                ("(Persist|MaxMessages|MaxTime|PingInterval|HeaderTemplate|\\[m\\])", ".{0,30}"),
                0..20,
            )
        ) {
            let text: String = lines.iter().map(|(k, v)| format!("{k} {v}\n")).collect();
            let _ = MeteorConf::from_file_text(&text);
        }
    }
}
