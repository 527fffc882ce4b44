//! Herald's wire contract, shared by the server, the CLI, the bench tool and every SDK, and
//! depending on nothing else of Herald: the JSON commands a client sends over WebSocket
//! ([`command`]), the frames the server sends back, typed ([`reply`], [`sse`]) and as the
//! server's fast encoders ([`frame`]), error codes and their HTTP statuses ([`error`],
//! [`http`]), cursor strings ([`cursor`]), client token claims and minting ([`token`]), the push
//! receipt ([`receipt`]) and what one provider send came to ([`send_result`]), query
//! parameters' rule ([`query`]) and the strict JSON reading of what clients send
//! ([`strict_json`]).
//! docs/protocol.md describes the same thing for people; `tests/vectors/` pins it for machines.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod command;
pub mod cursor;
pub mod error;
pub mod frame;
pub mod http;
pub mod query;
pub mod receipt;
pub mod reply;
pub mod send_result;
pub mod sse;
pub mod strict_json;
pub mod token;

pub use cursor::{Cursor, Epoch};
pub use error::{ErrorCode, HeraldError};
pub use send_result::SendResult;
