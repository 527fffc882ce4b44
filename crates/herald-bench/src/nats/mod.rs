//! NATS as a peer of Herald in `herald bench` (`--peer nats`, or `--target nats://HOST:PORT`):
//! the same scenarios (`fanout`, `subscribe-storm`, `connections`) run against `nats-server`
//! with a minimal client of NATS's text protocol written here, so both sides of every ratio come
//! from one tool, the same worker processes and the same /proc readings.
//!
//! How each Herald operation maps to NATS's:
//! - a subscriber of channel `a/b` is a `SUB a.b` ([`protocol::subject`]);
//! - a subscribe's acknowledgement is the `PONG` to a `PING` written right after its `SUB`
//!   (NATS answers a `SUB` with nothing; a `PONG` comes once everything before its `PING` was
//!   processed), one `PING` per `SUB`, so every subscription is confirmed on its own as Herald's
//!   are;
//! - a publish is a `PUB` of the same stamped payload (`{"ts":N}`) followed by a `PING`, and
//!   the publisher waits for the `PONG` as Herald's publishers wait for their HTTP answer.
//!   (NATS stores nothing: Herald's answer comes after a durable append, NATS's after the
//!   message was handed to its subscribers' buffers.)

pub mod client;
pub mod protocol;

pub use client::NatsClient;
