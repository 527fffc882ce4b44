//! Writing a channel message to one MQTT connection: which subscription it came through and
//! what that subscription was granted (QoS, Retain As Published, No Local), whether it is sent
//! at all (a retained clear is no retained message, an expired message is not sent
//! [MQTT-3.3.2-5], a packet over the client's Maximum Packet Size is dropped [MQTT-3.1.2-24]),
//! and at QoS 1 a packet identifier within the client's Receive Maximum, or a wait for one
//! ([`crate::inflight`]). The bytes come from the message's shared encoding
//! ([`crate::outbound`]), or, for a v5 message with a Message Expiry Interval, from an encoding
//! of this delivery's own.

use bytes::BytesMut;
use herald_core::message::SharedMessage;

use crate::inflight::Waiting;
use crate::outbound;
use crate::packet::{self, Packet, ProtocolVersion, QoS};
use crate::wire::{now_ms, MqttWire};

impl MqttWire {
    /// Appends one message as a PUBLISH to `out` (or keeps it waiting for the QoS 1 window);
    /// returns the bytes appended.
    pub(crate) fn write_message(
        &mut self,
        out: &mut Vec<u8>,
        message: &SharedMessage,
        replayed: bool,
    ) -> usize {
        let Some(granted) = self.subscriptions.get(&message.channel) else {
            return 0;
        };
        if granted.no_local && self.published_here(message) {
            return 0;
        }
        let outgoing = outbound::outgoing(message);
        if replayed && outgoing.clear {
            // A retained clear is no retained message.
            return 0;
        }
        if outgoing.props.expiry_at_ms.is_some_and(|at| at <= now_ms()) {
            return 0;
        }
        let retain = replayed || (granted.retain_as_published && outgoing.retain);
        drop(outgoing);
        let qos = granted.qos.min(QoS::AtLeastOnce);
        if qos == QoS::AtLeastOnce && !self.outbound.has_room() {
            self.outbound.wait(Waiting {
                message: message.clone(),
                retain,
            });
            return 0;
        }
        self.write_publish(out, message, retain, qos)
    }

    pub(crate) fn write_publish(
        &mut self,
        out: &mut Vec<u8>,
        message: &SharedMessage,
        retain: bool,
        qos: QoS,
    ) -> usize {
        let expiry = outbound::outgoing(message).props.expiry_at_ms;
        if let (ProtocolVersion::V5, Some(at)) = (self.version, expiry) {
            return self.write_expiring(out, message, retain, qos, at);
        }
        let shared = outbound::shared(message, self.version);
        if shared.is_empty() {
            return 0;
        }
        let len = match qos {
            QoS::AtMostOnce => shared.len(),
            _ => outbound::len_at_qos1(shared),
        };
        // Never more than the client said it takes [MQTT-3.1.2-24]: the message is dropped.
        if len > self.client_max_packet as usize {
            return 0;
        }
        let id = match qos {
            QoS::AtMostOnce => None,
            _ => match self.outbound.take_id() {
                Some(id) => Some(id),
                None => return 0,
            },
        };
        outbound::write(out, shared, retain, id)
    }

    /// A message with a Message Expiry Interval, encoded for this delivery with the time left
    /// (v5 only: 3.1.1 has no properties, and takes the shared encoding).
    fn write_expiring(
        &mut self,
        out: &mut Vec<u8>,
        message: &SharedMessage,
        retain: bool,
        qos: QoS,
        expires_at_ms: u64,
    ) -> usize {
        let left_ms = expires_at_ms.saturating_sub(now_ms());
        let Some(mut publish) = outbound::publish_packet(message) else {
            return 0;
        };
        publish.retain = retain;
        publish.qos = qos;
        publish.properties.message_expiry_interval = Some(
            u32::try_from(left_ms.div_ceil(1000))
                .unwrap_or(u32::MAX)
                .max(1),
        );
        if qos != QoS::AtMostOnce {
            // A placeholder for the length; the real id is taken once it fits.
            publish.packet_id = std::num::NonZeroU16::new(1);
        }
        let mut publish = Packet::Publish(publish);
        if packet::encoded_len(&publish, self.version) > self.client_max_packet as usize {
            return 0;
        }
        if let Packet::Publish(p) = &mut publish {
            if p.packet_id.is_some() {
                match self.outbound.take_id() {
                    Some(id) => p.packet_id = Some(id),
                    None => return 0,
                }
            }
        }
        let mut bytes = BytesMut::new();
        match packet::encode(&publish, self.version, &mut bytes) {
            Ok(()) => {
                out.extend_from_slice(&bytes);
                bytes.len()
            }
            Err(_) => 0,
        }
    }

    /// Whether `message` was published by this client (QoS 2 publishes carry its id in their
    /// message id; phase 1 cannot tell for QoS 0 and 1).
    fn published_here(&self, message: &herald_core::message::StoredMessage) -> bool {
        message.client_id.as_deref().is_some_and(|id| {
            id.strip_prefix("mqtt:")
                .and_then(|rest| rest.strip_prefix(&*self.client_id))
                .is_some_and(|rest| rest.starts_with(':'))
        })
    }
}
