//! The entry points of Herald's fuzz targets: one function per parser that a client, a provider
//! or an operator's file reaches, each feeding it arbitrary bytes and checking what must hold
//! beyond "no panic" where that is cheap (a parsed cursor encodes back to the same cursors, a
//! frame the server encodes decodes to itself, a tag expression prints to a text that parses to
//! it, ...). A property that fails panics, which is what the fuzzer reports.
//!
//! The `cargo fuzz` targets under `fuzz/fuzz_targets/` are one line each, calling these through
//! [`TARGETS`]; this crate's `tests/replay.rs` runs every committed input (`fuzz/corpus/<target>`
//! and `fuzz/regressions/<target>`) through the same functions on stable Rust, in the normal
//! `cargo test`.
//!
//! - [`edge`]: WebSocket frames, the SSE fast path's request head;
//! - [`proto`]: JSON commands, cursor strings;
//! - [`push`]: tag expressions;
//! - [`meteor`]: Meteor request lines, controller commands, meteord.conf;
//! - [`mqtt`]: MQTT 5.0 and 3.1.1 packets;
//! - [`pusher`]: the Pusher client protocol's frames;
//! - [`config`]: Herald's config file;
//! - [`providers`]: APNs, FCM and Web Push answers.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod config;
pub mod edge;
pub mod meteor;
pub mod mqtt;
pub mod proto;
pub mod providers;
pub mod push;
pub mod pusher;

/// A target's entry point: feeds it one input, panics if a property fails.
pub type Entry = fn(&[u8]);

/// Every fuzz target by name (the name of its file in `fuzz/fuzz_targets/` and of its corpus
/// and regressions folders), with its entry point.
pub const TARGETS: &[(&str, Entry)] = &[
    ("ws_frames", edge::ws_frames),
    ("sse_head", edge::sse_head),
    ("command_json", proto::command_json),
    ("cursor_strings", proto::cursor_strings),
    ("tag_expr", push::tag_expr),
    ("meteor_request", meteor::meteor_request),
    ("meteor_command", meteor::meteor_command),
    ("meteord_conf", meteor::meteord_conf),
    ("mqtt_packets", mqtt::mqtt_packets),
    ("pusher_frames", pusher::pusher_frames),
    ("config_file", config::config_file),
    ("provider_answers", providers::provider_answers),
];

/// The entry point of the target called `name`.
pub fn target(name: &str) -> Entry {
    TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| *f)
        .unwrap_or_else(|| panic!("no fuzz target called {name:?}"))
}
