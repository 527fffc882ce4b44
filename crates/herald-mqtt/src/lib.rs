//! MQTT 5.0 and 3.1.1 for Herald: any MQTT client is a Herald client (issue 33).
//!
//! This crate owns MQTT's wire protocol. Today that is the packet codec, [`packet`]: the typed
//! model of the fifteen control packets of both versions, and [`decode()`] / [`encode()`] /
//! [`encoded_len()`], strict to the normative statements of the OASIS standards (each rule's
//! `[MQTT-x.y.z-n]` number is next to the code that enforces it), so that a conformance suite
//! finds the answer the specification names. Next it will own the listener, CONNECT handling and
//! sessions, built over `herald-edge`'s driver as `herald-meteor` is.
//!
//! The codec depends on `bytes` and `thiserror` only (no Herald crate, no runtime), so it can be
//! fuzzed (`crates/herald-fuzz/src/mqtt.rs`) and reused by tests, benches and clients.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod access;
mod connect;
mod inbound;
mod inflight;
mod outbound;
pub mod packet;
pub mod payload;
pub mod serve;
pub mod settings;
mod subscriptions;
mod takeover;
pub mod topic_map;
mod wire;

pub use packet::{
    decode, encode, encoded_len, DecodeError, EncodeError, ErrorResponse, Packet, ProtocolVersion,
    QoS, ReasonCode,
};
