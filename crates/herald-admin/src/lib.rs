//! Herald's admin dashboard as the server ships it: the built web assets (`assets/`, bundled
//! from `web/` by `scripts/build-admin.sh` and committed, so `cargo build` needs no Node),
//! embedded at compile time and served under `/admin` with a strict Content-Security-Policy
//! ([`assets`]), and the stateless, signed session cookie the dashboard logs in with
//! ([`session`]). Checking a session against the server's keys is herald-api's (`Api::authorize*`),
//! which depends on this crate; this crate depends on nothing of Herald.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod assets;
pub mod session;

pub use assets::router;
pub use session::{Session, SessionError, SessionKey, Sessions};
