//! A connection's client becoming a user after the connection opened: a foreign protocol's
//! sign-in (Pusher's `pusher:signin`) makes an app's connection without a `sub` that user, as
//! a token refresh would. The connection keeps its place among the live clients
//! ([`herald_core::live::Registration::refresh`]), which matches the user from then on (so
//! revocations and disconnects naming the `sub` reach it), and its lifecycle events say the
//! anonymous connection left (`reauthenticated`) and the user's connected (`user.online`).

use herald_core::{ErrorCode, HeraldError};

use super::{open, ClientSession};

impl ClientSession {
    /// Makes the connection's client the user `sub` with `user_info` (its presence data, JSON
    /// text). A connection already signed in as another user is refused (`forbidden`); signing
    /// in again as the same user changes nothing but the data.
    pub fn sign_in(&mut self, sub: &str, user_info: Option<Box<str>>) -> Result<(), HeraldError> {
        let current = self.client()?;
        if !current.sub.is_empty() && current.sub != sub {
            return Err(HeraldError::forbidden(format!(
                "this connection is signed in as {:?} already",
                current.sub
            )));
        }
        if sub.is_empty() {
            return Err(HeraldError::new(
                ErrorCode::BadRequest,
                "a user id is not empty",
            ));
        }
        let mut client = current.clone();
        client.sub = sub.to_owned();
        client.user_info = user_info;
        if let Some(registered) = &mut self.registered {
            open::refresh(
                &self.edge,
                registered,
                &client,
                &self.outbox,
                self.transport,
            );
        }
        self.client = Some(client);
        Ok(())
    }

    /// The user the connection's client is (its `sub`), if it has one.
    pub fn user(&self) -> Option<&str> {
        self.client
            .as_ref()
            .map(|c| c.sub.as_str())
            .filter(|sub| !sub.is_empty())
    }
}
