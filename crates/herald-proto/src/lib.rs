//! Herald's client wire protocol, shared by the server transports, the CLI, the bench tool and
//! SDK test vectors: the JSON commands a client sends over WebSocket ([`command`]), the frames
//! the server sends back ([`frame`]), and the cursor strings SSE and long-poll use ([`cursor`]).
//! docs/protocol.md describes the same thing for people.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod command;
pub mod cursor;
pub mod frame;
