//! Errors a client or publisher can be told about. The codes, their HTTP statuses and the error
//! type are part of the wire contract and live in `herald-proto`; they are re-exported here so
//! the server's crates name them through core as before.

pub use herald_proto::error::{ErrorCode, HeraldError};
