//! A typed Rust client of a Herald server, decoding the wire through `herald-proto`'s types:
//!
//! - [`ws`]: a WebSocket connection — connect with a token, subscribe (with a resume cursor),
//!   unsubscribe, publish, history, ack, ping, and a stream of typed server frames;
//! - [`sse`]: a Server-Sent Events stream opened with channels and a `Last-Event-ID` cursor;
//! - [`poll`]: long-poll requests with channels and a `since` cursor;
//! - [`subscriber`]: a WebSocket subscriber that keeps each channel's position, reconnects with
//!   backoff and resumes, so every message arrives once and in order across restarts (what
//!   `herald subscribe` runs on, and what the TypeScript, Python and Java SDKs give);
//! - [`api`]: the publisher HTTP API (publish, batch, channels, devices, pushes, receipts,
//!   apps, keys, tokens, stats);
//! - [`tls`]: which certificates `https://` and `wss://` servers are checked against (the web
//!   roots, plus a private CA given with [`tls::trust_ca_file`]).
//!
//! Every error the server reports reaches the caller as [`Error::Server`], with the server's
//! code and message ([`ServerError`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), herald_client::Error> {
//! use herald_client::{api::Publisher, ws::WsClient};
//! use herald_proto::reply::ServerBody;
//!
//! let base = "http://127.0.0.1:7070";
//! let publisher = Publisher::new(base, Some("hk_dev_key"));
//! let token = publisher.mint_token(&serde_json::json!({"sub": "alice", "channels": ["news"]})).await?;
//!
//! let mut ws = WsClient::connect(base, Some(&token.token)).await?;
//! let subscribed = ws.subscribe("news", None).await?;
//! println!("news is at seq {}", subscribed.seq);
//!
//! publisher.publish("news", &serde_json::json!({"t": "hello"}), None).await?;
//! while let Some(frame) = ws.next_frame().await? {
//!     if let ServerBody::Message(m) = frame.parse()?.body {
//!         println!("{} #{}: {}", m.channel, m.seq, m.data.get());
//!         break;
//!     }
//! }
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod api;
mod error;
pub mod poll;
pub mod sse;
pub mod subscriber;
pub mod tls;
pub mod types;
pub mod url;
pub mod ws;

pub use error::{Error, ServerError};
pub use herald_proto as proto;
