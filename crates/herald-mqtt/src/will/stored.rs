//! Wills stored with their sessions (`super`'s "Durable"): how a will is kept in the store
//! ([`stored`]: a CONNECT packet holding only the client identifier and the will, in the
//! connection's version, so the codec that reads every CONNECT reads it back), and what a
//! starting node does with the stored wills of sessions no connection holds
//! ([`PendingWills::recover`]), and a node that ends a lost cluster node's sessions with
//! theirs ([`PendingWills::wait_all`]).

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use herald_core::tenant::AppId;
use herald_edge::Edge;

use super::{DueWill, PendingWills};
use crate::packet::{self, Connect, ConnectProperties, Packet, ProtocolVersion, Will};
use crate::session::store::{StoredWill, WaitingWill};
use crate::wire::now_ms;

/// `will`, left by the connection of `client_id` speaking `version`, as it is stored.
pub(crate) fn stored(will: &Will, version: ProtocolVersion, client_id: &str) -> StoredWill {
    let connect = Connect {
        protocol_version: version,
        clean_start: false,
        keep_alive: 0,
        client_id: client_id.to_owned(),
        will: Some(will.clone()),
        username: None,
        password: None,
        properties: ConnectProperties::default(),
    };
    let mut out = BytesMut::new();
    // Not reached: a will the codec decoded encodes again.
    if let Err(e) = packet::encode(&Packet::Connect(Box::new(connect)), version, &mut out) {
        tracing::warn!(client_id, error = %e, "MQTT: a will could not be encoded to be stored");
    }
    StoredWill {
        will: out.to_vec(),
        delay_ms: i64::from(will.properties.will_delay_interval) * 1000,
    }
}

/// The stored will `bytes` of the session `client_id` of `app`, to publish through `edge`
/// with the idempotency key numbered `n`; `None` if it does not decode (logged).
pub(super) fn due_from(
    edge: &Arc<Edge>,
    app: &AppId,
    client_id: &str,
    bytes: &[u8],
    n: u64,
) -> Option<DueWill> {
    let mut buf = BytesMut::from(bytes);
    let connect = match packet::decode(&mut buf, None, u32::MAX) {
        Ok(Some(Packet::Connect(connect))) => connect,
        _ => {
            tracing::warn!(client_id, "MQTT: a stored will could not be read; dropped");
            return None;
        }
    };
    let will = connect.will?;
    Some(DueWill {
        edge: edge.clone(),
        app: app.clone(),
        client_id: client_id.into(),
        version: connect.protocol_version,
        key: crate::origin::key(client_id, will.qos, n),
        will,
    })
}

impl PendingWills {
    /// At start, once the store counts the sessions a stopped server cut as disconnected:
    /// every stored will of a session no connection holds waits for what is left of its delay
    /// (or its session's expiry), then is published unless a new connection of its session
    /// took it first. Wills taken from the store later are published through `edge`.
    pub(crate) async fn recover(self: &Arc<Self>, edge: Arc<Edge>) {
        let _ = self.edge.set(edge);
        let waiting = match self.store.mqtt_wills_waiting().await {
            Ok(waiting) => waiting,
            Err(e) => {
                tracing::warn!(error = %e, "MQTT: the stored wills could not be read");
                return;
            }
        };
        self.wait_all(waiting);
    }

    /// Every will of `waiting` (stored wills of sessions no connection holds) waits for what
    /// is left of its delay (or its session's expiry), then is published unless a new
    /// connection of its session took it first. Nothing before [`PendingWills::recover`] gave
    /// the server's transports.
    pub(crate) fn wait_all(self: &Arc<Self>, waiting: Vec<WaitingWill>) {
        let Some(edge) = self.edge.get().cloned() else {
            return;
        };
        let now = now_ms();
        // Numbered from now, as a connection's keys are (`crate::inflight::InboundQoS2`).
        let first = now.saturating_mul(1000);
        for (i, waiting) in waiting.into_iter().enumerate() {
            let key = waiting.key;
            let n = first + i as u64;
            let Some(due) = due_from(&edge, &key.app, &key.client_id, &waiting.will.will, n) else {
                continue;
            };
            let due_ms = u64::try_from(waiting.due_ms).unwrap_or(0);
            let wait = Duration::from_millis(due_ms.saturating_sub(now));
            tracing::debug!(
                client_id = key.client_id.as_str(),
                wait_ms = wait.as_millis() as u64,
                "MQTT: a stored will waits"
            );
            self.wait(key, due, wait);
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::packet::{QoS, TopicName, WillProperties};

    #[test]
    fn a_stored_will_reads_back_as_it_was_in_both_versions() {
        for version in [ProtocolVersion::V311, ProtocolVersion::V5] {
            let mut properties = WillProperties::default();
            if version == ProtocolVersion::V5 {
                properties.will_delay_interval = 7;
                properties.content_type = Some("text/plain".into());
                properties.message_expiry_interval = Some(60);
            }
            let will = Will {
                topic: TopicName::new("sensors/1/status").expect("a topic"),
                payload: Bytes::from_static(b"gone"),
                qos: QoS::AtLeastOnce,
                retain: true,
                properties,
            };
            let kept = stored(&will, version, "sensor-1");
            let expected_delay = if version == ProtocolVersion::V5 {
                7000
            } else {
                0
            };
            assert_eq!(kept.delay_ms, expected_delay);
            let mut buf = BytesMut::from(&kept.will[..]);
            let Ok(Some(Packet::Connect(connect))) = packet::decode(&mut buf, None, u32::MAX)
            else {
                panic!("{version:?}: not a CONNECT");
            };
            assert_eq!(connect.protocol_version, version);
            assert_eq!(connect.client_id, "sensor-1");
            assert_eq!(connect.will, Some(will));
        }
    }
}
