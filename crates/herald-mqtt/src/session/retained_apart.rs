//! A SUBSCRIBE's retained messages told apart from a resumed session's replay.
//!
//! Both reach the connection's writer as replayed frames (core's `OutFrame::Replayed`): the
//! replay of a channel the session resumed (`connection.rs`, `missed.rs`) and the retained
//! message a SUBSCRIBE is sent ([MQTT-3.3.1-6]: `crate::retained`, `crate::wildcards`). For a
//! channel the session is catching up on (it resumed from a stored position), a frame of the
//! channel was read as its replay: the retained message of a SUBSCRIBE made meanwhile (above
//! all a wildcard SUBSCRIBE right after the CONNECT, while the replay is still on its way in
//! pages) then went with RETAIN 0, moved the channel's position past what the replay had yet
//! to send, took a packet identifier reserved for the replay's message of the same seq, and
//! released the identifiers reserved for the replay's messages below it as if the replay had
//! passed over them (`resend.rs`), though they were still to come.
//!
//! So such a retained message is queued as a copy of its own ([`MqttWire::apart_from_replays`],
//! which the SUBSCRIBE calls for the frames it queues) and the writer tells it by identity
//! ([`MqttWire::retained_at_subscribe`]): it goes as the retained message it is (RETAIN 1, a
//! packet identifier of its own), moves no position and passes over no reserved identifier;
//! the replay's messages go on as before, each one (no retained window stops a message of a
//! replay: it is not a live copy). An identifier is released only when the replay really
//! passed over its message (gone from the log when the replay read it).
//!
//! **Cost.** Nothing for a clean session, nor for a persistent one catching up on nothing; a
//! copy of the message's header (its data is shared) per retained message of a channel being
//! caught up on, and a pointer comparison per replayed frame while such copies are queued.

use std::sync::Arc;

use herald_core::message::{SharedMessage, StoredMessage};

use crate::wire::MqttWire;

impl MqttWire {
    /// The retained messages a SUBSCRIBE queues (`after_suback`), each one of a channel the
    /// session is catching up on made a copy of its own and noted (see the module doc).
    pub(crate) fn apart_from_replays(
        &mut self,
        after_suback: Vec<SharedMessage>,
    ) -> Vec<SharedMessage> {
        let Some(persist) = self.persist.as_mut() else {
            return after_suback;
        };
        if persist.catching_up.is_empty() {
            return after_suback;
        }
        (after_suback.into_iter())
            .map(|m| {
                if !persist.catching_up.contains(&m.channel) {
                    return m;
                }
                let copy: SharedMessage = Arc::new(StoredMessage::new(
                    m.channel.clone(),
                    m.epoch.clone(),
                    m.seq,
                    m.client_id.clone(),
                    m.time,
                    m.data.clone(),
                ));
                persist.retained_at_subscribe.push(copy.clone());
                copy
            })
            .collect()
    }

    /// Whether `message`, a replayed frame the writer took, is a SUBSCRIBE's retained message
    /// noted by [`MqttWire::apart_from_replays`] (the note is taken out).
    pub(crate) fn retained_at_subscribe(&mut self, message: &SharedMessage) -> bool {
        let Some(persist) = self.persist.as_mut() else {
            return false;
        };
        let notes = &mut persist.retained_at_subscribe;
        match notes.iter().position(|m| Arc::ptr_eq(m, message)) {
            Some(at) => {
                notes.swap_remove(at);
                if notes.is_empty() {
                    *notes = Vec::new();
                }
                true
            }
            None => false,
        }
    }
}
