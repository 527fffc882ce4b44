//! MQTT 5.0 and 3.1.1 for Herald: any MQTT client is a Herald client (issue 33).
//!
//! This crate owns MQTT's wire protocol. Today that is the packet codec, [`packet`]: the typed
//! model of the fifteen control packets of both versions, and [`decode()`] / [`encode()`] /
//! [`encoded_len()`], strict to the normative statements of the OASIS standards (each rule's
//! `[MQTT-x.y.z-n]` number is next to the code that enforces it), so that a conformance suite
//! finds the answer the specification names. The connection is built on it over `herald-edge`'s
//! driver, as `herald-meteor` is: [`serve::serve`] (which `herald-server`'s MQTT listener calls)
//! takes the CONNECT (`connect.rs`: version, client identifier, a client token, a publisher API
//! key or the anonymous rules, the CONNACK), then runs the connection as a driver `Wire`
//! (`wire.rs`): packets handled in `inbound.rs`, messages written (`deliver.rs`) from one
//! encoding per message (`outbound.rs`), packet identifiers and QoS state in `inflight.rs`, what
//! each subscription was granted in `subscriptions.rs`, which message a SUBSCRIBE is sent as a
//! topic's retained message in `retained.rs` (and how it meets live ones in
//! `retained_window.rs`), wildcard subscriptions in `wildcards.rs`
//! (over core's filter registry), shared subscriptions in `shared.rs` (over core's share
//! groups), one connection per client identifier in `takeover.rs` (across a cluster's nodes
//! with `cluster.rs`),
//! persistent sessions in [`session`] (kept by herald-store through its storage trait), a
//! device's inbox on the topic `$device` in `inbox.rs` (its PUBACK is the push's ack).
//! The same connection code serves MQTT over WebSocket at `/mqtt` on the HTTP listener
//! ([`websocket`]), over edge's WebSocket byte stream. Topics map to channels in [`topic_map`],
//! payloads to message data in [`payload`], and the anonymous mode's rules are [`access`]'s.
//! A message's publisher and publish QoS are read from its key (`origin.rs`), and wills are
//! published as `will.rs` says. Parking idle connections comes next (docs/design/mqtt.md,
//! phase 2). Topic aliases towards a v5 client are `topic_aliases.rs`'s, and the read-only
//! `$SYS/` statistics [`sys`]'s.
//!
//! The codec depends on `bytes` and `thiserror` only (no Herald crate, no runtime), so it can be
//! fuzzed (`crates/herald-fuzz/src/mqtt.rs`) and reused by tests, benches and clients.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod access;
mod cluster;
mod connect;
mod deliver;
mod inbound;
mod inbox;
mod inflight;
mod origin;
mod outbound;
pub mod packet;
mod park;
pub mod payload;
mod retained;
mod retained_window;
pub mod serve;
pub mod session;
pub mod settings;
mod shared;
mod subscriptions;
pub mod sys;
mod takeover;
mod topic_aliases;
pub mod topic_map;
pub mod websocket;
mod wildcards;
mod will;
mod wire;

pub use packet::{
    decode, encode, encoded_len, DecodeError, EncodeError, ErrorResponse, Packet, ProtocolVersion,
    QoS, ReasonCode,
};
