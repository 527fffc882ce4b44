//! The publish rule, in one place: every path that stores a message (HTTP single and batch,
//! WebSocket `publish`, Meteor's controller `ADDMESSAGE`, pushes) goes through [`Publisher`],
//! which checks the payload against the app's size limit, appends through the [`Engine`], and
//! counts in the app's `published` usage only the messages that were new: a publisher that
//! retries with the same idempotency key is billed once, on every path.
//!
//! Who may publish (a publisher key, a client token's `publish` patterns, the Meteor port) is
//! each path's own question and is answered before it calls this.
//!
//! What a message does to its channel's retained message ([`Retain`]) is read from its data by
//! the server's [`RetainRule`] (herald-mqtt's: a `$mqtt` envelope with `"retain":true` sets or
//! clears it), so an HTTP, WebSocket or Meteor publish can do what an MQTT RETAIN 1 publish
//! does; MQTT's own paths say it themselves ([`Publisher::message_retaining`]).

use std::sync::Arc;

use bytes::Bytes;

use crate::engine::Engine;
use crate::error::{ErrorCode, HeraldError};
use crate::log::Appended;
use crate::message::{NewMessage, Retain};
use crate::name::ChannelName;
use crate::tenant::AppId;
use crate::usage::UsageMeter;

/// What storing a message whose data is the given JSON does to its channel's retained message
/// (see the module doc); cheap for data that says nothing of it.
pub type RetainRule = fn(&Bytes) -> Retain;

/// Validates, stores and counts published messages.
pub struct Publisher {
    engine: Arc<Engine>,
    usage: Arc<UsageMeter>,
    server_max_message_bytes: usize,
    /// Reads a message's retain from its data; none: every message leaves it untouched.
    retain_rule: Option<RetainRule>,
}

impl Publisher {
    /// A publisher storing through `engine` and counting in `usage`; no message payload may be
    /// larger than `server_max_message_bytes`, and an app's own limit may be lower.
    pub fn new(
        engine: Arc<Engine>,
        usage: Arc<UsageMeter>,
        server_max_message_bytes: usize,
    ) -> Self {
        Publisher {
            engine,
            usage,
            server_max_message_bytes,
            retain_rule: None,
        }
    }

    /// This publisher, reading what each message does to its channel's retained message from
    /// its data with `rule`.
    pub fn with_retain_rule(mut self, rule: RetainRule) -> Self {
        self.retain_rule = Some(rule);
        self
    }

    /// The engine messages are stored through.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The largest payload `app` may publish, in bytes.
    pub fn max_message_bytes(&self, app: &AppId) -> usize {
        self.usage
            .app(app)
            .max_message_bytes(self.server_max_message_bytes)
    }

    /// A message of `app` with payload `data` (JSON text, already validated) and idempotency
    /// key `id`, refused when the payload is over the app's limit or the key is malformed. What
    /// it does to its channel's retained message is the [`RetainRule`]'s reading of `data`.
    pub fn message(
        &self,
        app: &AppId,
        id: Option<String>,
        data: &[u8],
    ) -> Result<NewMessage, HeraldError> {
        let mut message = self.message_retaining(app, id, data, Retain::Untouched)?;
        if let Some(rule) = self.retain_rule {
            message.retain = rule(&message.data);
        }
        Ok(message)
    }

    /// [`Publisher::message`] doing `retain` to its channel's retained message, whatever its
    /// data says (an MQTT PUBLISH's RETAIN flag, a will's Will Retain).
    pub fn message_retaining(
        &self,
        app: &AppId,
        id: Option<String>,
        data: &[u8],
        retain: Retain,
    ) -> Result<NewMessage, HeraldError> {
        let max = self.max_message_bytes(app);
        if data.len() > max {
            return Err(HeraldError::new(
                ErrorCode::TooLarge,
                format!("message data is {} bytes; the limit is {max}", data.len()),
            ));
        }
        if let Some(id) = &id {
            crate::engine::check_message_id(id)?;
        }
        Ok(NewMessage {
            id,
            data: Bytes::copy_from_slice(data),
            retain,
            hold: None,
        })
    }

    /// Stores `messages` in `channel` (in order, all or nothing) and counts the ones that were
    /// not duplicates of an earlier publish in `app`'s usage.
    pub async fn publish(
        &self,
        app: &AppId,
        channel: &ChannelName,
        messages: Vec<NewMessage>,
    ) -> Result<Vec<Appended>, HeraldError> {
        let appended = self.engine.publish(channel, messages).await?;
        let new = appended.iter().filter(|a| !a.duplicate).count() as u64;
        if new > 0 {
            self.usage.app(app).published(new);
        }
        Ok(appended)
    }

    /// Stores one message in each of `logs` at once (a push to several device inboxes is one
    /// message, however many logs hold it) and counts it once in `app`'s usage unless every log
    /// already held it. Returns whether it was such a retry, and the message's seq in each log
    /// (in `logs` order; for a retry, where it was stored the first time).
    pub async fn publish_to_each(
        &self,
        app: &AppId,
        logs: &[ChannelName],
        message: NewMessage,
    ) -> Result<(bool, Vec<u64>), HeraldError> {
        let appends = logs.iter().map(|log| {
            let message = message.clone();
            async move { self.engine.publish(log, vec![message]).await }
        });
        let mut retry = !logs.is_empty();
        let mut seqs = Vec::with_capacity(logs.len());
        for appended in futures_util::future::join_all(appends).await {
            let appended = appended?;
            retry &= appended.iter().all(|a| a.duplicate);
            seqs.extend(appended.first().map(|a| a.message.seq));
        }
        if !retry {
            self.usage.app(app).published(1);
        }
        Ok((retry, seqs))
    }
}
