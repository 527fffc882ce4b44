//! Herald's cluster bus over Redis: several nodes over one durable store act as one server.
//!
//! - **Fan-out**: each node's commits reach its own subscribers at once and the other nodes
//!   through Redis 7 sharded pub/sub (`SPUBLISH`, one Redis channel per Herald channel, see
//!   [`names`]); a node subscribes (`SSUBSCRIBE`) only to the channels its hub has local
//!   subscribers for, and drops them when the hub forgets the channel.
//! - **Order and gaps**: per channel, a [`sequencer::Sequencer`] releases seqs strictly in
//!   order after the hub's head floor; duplicates are dropped; a seq that does not arrive
//!   within [`BusOptions::gap_wait`] is read from the log, as is what a channel's head in
//!   Redis shows it missed while not subscribed. Redis being slow or down never blocks a
//!   publisher and never makes a subscriber skip a message: it only delays other nodes'
//!   delivery until the log is read.
//! - **Heads**: each channel's newest seq is kept in Redis, moved by the script that publishes
//!   its messages (`heads`), so a node learns where a channel new to it stands, and whether it
//!   missed anything while subscribing, without reading the log.
//! - **Cache events**: applied locally at once and published on one sharded channel; token
//!   secrets never travel (the receiver reads them from the store); after a reconnect the
//!   caches are reloaded from the store.
//! - **Presence**: cluster-wide subscriber counts per channel and connection counts per app
//!   ([`presence`]), summed from a hash each node writes periodically.
//!
//! - **Claims**: which node holds each claimed name of an app (an MQTT client identifier) and
//!   the takeovers between nodes, the holder answering once it let the name go
//!   (`claims.rs`); a crashed node found lost by one node alive, which ends what the crashed
//!   node held (`lost_nodes.rs`); a node that cannot write its heartbeat fences itself
//!   (lets go of what it holds, takes nothing new) before the others take it for lost
//!   (`fence.rs`).
//! - **Lifecycle events**: channels occupied and vacated once in the cluster, and a lost node's
//!   connections reported gone by another node ([`lifecycle`]), only while a listener joined
//!   the node's lifecycle registry.
//! - **Apps' feeds**: while a node has filter subscribers of an app (MQTT's `+` and `#`),
//!   every node also publishes the app's messages on the app's feed, which that node follows
//!   and hands to its filters only (`feeds.rs`); a flag in Redis that lapses with a crashed
//!   node says when, and costs publishing nothing while no node holds it.
//! - **Shared subscriptions**: a group with members on several nodes is one group: every node
//!   with members hears each message on the feed and the owner, found by hashing the message
//!   over the group's holders, delivers it (`shares.rs`).
//! - **TLS**: `rediss://` URLs connect over TLS, verifying the server against the web roots
//!   and [`BusOptions::tls_ca_pem`]; `redis://` URLs stay plain.
//! - **In the log**: losing Redis and getting it back are said once each, in Herald's words
//!   (`link_log`), not as the Redis client's internals.
//!
//! [`RedisBus`] is the entry point; [`codec`] and [`events`] are the wire formats.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod bus;
mod claims;
pub mod codec;
mod error;
pub mod events;
mod feeds;
mod fence;
mod followed;
mod head_reads;
mod heads;
pub mod lifecycle;
mod link_log;
mod lost_nodes;
mod members;
pub mod names;
pub mod presence;
mod receiver;
mod repair;
mod sender;
pub mod sequencer;
mod shares;
mod subscriptions;
mod tls;

pub use bus::{BusOptions, BusStats, Connected, RedisBus};
pub use error::{BusError, DecodeError};
