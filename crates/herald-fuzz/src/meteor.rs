//! `herald-meteor`'s parsers: subscriber request lines (a channel's Meteor name parses back to
//! the channel), controller command lines (the parts are pieces of the line), and meteord.conf
//! files (every template of every mode renders).

use herald_core::ChannelName;
use herald_meteor::command::{self, Command};
use herald_meteor::request::{self, meteor_name, Request};
use herald_meteor::MeteorConf;

/// A subscriber port's request line.
pub fn meteor_request(data: &[u8]) {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    let _ = request::parse(line, "");
    let Request::Subscribe(s) = request::parse(line, "/push") else {
        return;
    };
    assert!(!s.channels.is_empty(), "a subscribe names a channel");
    let names: Vec<&ChannelName> = s.channels.iter().map(|c| &c.name).collect();
    for (i, name) in names.iter().enumerate() {
        assert!(!names[..i].contains(name), "channels are de-duplicated");
        let again = request::parse(
            &format!("GET /push/h/m/{} HTTP/1.1", meteor_name(name)),
            "/push",
        );
        match again {
            Request::Subscribe(t) => assert_eq!(&t.channels[0].name, *name),
            other => panic!("{name:?}'s Meteor name does not parse back: {other:?}"),
        }
    }
}

/// A controller port's command line.
pub fn meteor_command(data: &[u8]) {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    match command::parse(line) {
        Command::AddMessage { channel, text } => {
            assert!(!channel.is_empty() && !channel.contains(char::is_whitespace));
            assert!(line.ends_with(text), "the text is the rest of the line");
        }
        Command::CountSubscribers { channel } => {
            assert!(!channel.is_empty() && !channel.contains(char::is_whitespace));
        }
        _ => {}
    }
}

/// A meteord.conf.
pub fn meteord_conf(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match MeteorConf::from_file_text(text) {
        Ok(conf) => {
            let mut out = Vec::new();
            for mode in conf.modes.values().chain([&conf.global]) {
                for t in [
                    &mode.header,
                    &mode.message,
                    &mode.channel_info,
                    &mode.ping,
                    &mode.shutdown,
                ] {
                    t.render(&mut out, |_, out| out.push(b'!'));
                }
            }
        }
        Err(e) => {
            let lines = text.split('\n').count();
            assert!(e.line <= lines, "error on line {} of {lines}", e.line);
        }
    }
}
