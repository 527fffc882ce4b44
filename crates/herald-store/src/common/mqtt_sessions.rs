//! MQTT persistent sessions (`herald_mqtt::session::store`), what both backends share: the
//! subscriptions as JSON text, and how rows become a session's positions, in-flight QoS 1 and
//! 2 messages, held inbound QoS 2 packet ids and waiting wills. Each backend holds its SQL (`sqlite::mqtt_sessions`,
//! `postgres::mqtt_sessions`).

use herald_core::log::StoreError;
use herald_mqtt::session::store::{
    SessionKey, StoredHeldQoS2, StoredInflight, StoredPosition, StoredSubscription, StoredWill,
    WaitingWill,
};

use crate::common::row::StoredRow;
use crate::common::values::{app_id, seq_from_db};

/// The columns of a session row, in the order [`session_header_of`] reads them.
pub(crate) const SESSION_COLUMNS: &str = "expiry_ms, disconnected_ms, subscriptions";
/// The columns of a position row, in the order [`position_of`] reads them.
pub(crate) const POSITION_COLUMNS: &str = "channel, epoch, seq";
/// The columns of an in-flight row, in the order [`inflight_of`] reads them.
pub(crate) const INFLIGHT_COLUMNS: &str = "packet_id, channel, epoch, seq, released, qos, retain";
/// The columns of a held inbound QoS 2 row, in the order [`held_qos2_of`] reads them.
pub(crate) const HELD_QOS2_COLUMNS: &str = "packet_id, n";

/// The columns of a will row, in the order [`will_of`] reads them.
pub(crate) const WILL_COLUMNS: &str = "will, delay_ms";

/// The wills of sessions no connection holds (their end recorded, or the session gone), as
/// [`waiting_will_of`] reads them: `w` the will, `s` its session (left joined).
pub(crate) const WAITING_WILLS: &str =
    "SELECT w.app, w.client_id, w.will, w.delay_ms, s.disconnected_ms, s.expiry_ms
     FROM mqtt_session_wills w
     LEFT JOIN mqtt_sessions s ON s.app = w.app AND s.client_id = w.client_id
     WHERE s.app IS NULL OR s.disconnected_ms IS NOT NULL";

/// The wills of the sessions a lost node held last (`$1` or `?1`, [`node_name`]'s form) that
/// no connection holds, as [`waiting_will_of`] reads them.
///
/// [`node_name`]: herald_mqtt::session::store::node_name
pub(crate) const NODE_WILLS: &str =
    "SELECT w.app, w.client_id, w.will, w.delay_ms, s.disconnected_ms, s.expiry_ms
     FROM mqtt_session_wills w
     JOIN mqtt_sessions s ON s.app = w.app AND s.client_id = w.client_id
     WHERE s.node = $1 AND s.disconnected_ms IS NOT NULL";

/// The session tables, each keyed by `(app, client_id, ...)`: deleting a session deletes its
/// rows in each.
pub(crate) const SESSION_TABLES: [&str; 5] = [
    "mqtt_session_positions",
    "mqtt_session_inflight",
    "mqtt_session_inbound_qos2",
    "mqtt_session_wills",
    "mqtt_sessions",
];

/// The session tables an expired session's rows are swept from: its will stays until it is
/// published (an expired session's will is due).
pub(crate) const SWEPT_TABLES: [&str; 4] = [
    "mqtt_session_positions",
    "mqtt_session_inflight",
    "mqtt_session_inbound_qos2",
    "mqtt_sessions",
];

/// A session's subscriptions as stored.
pub(crate) fn subscriptions_to_json(subscriptions: &[StoredSubscription]) -> String {
    crate::common::values::to_json(&subscriptions)
}

/// A session row: its expiry interval, when it was disconnected and its subscriptions.
pub(crate) fn session_header_of<R: StoredRow>(
    row: &R,
) -> Result<(i64, Option<i64>, Vec<StoredSubscription>), StoreError> {
    let expiry_ms: i64 = row.column(0)?;
    let disconnected_ms: Option<i64> = row.column(1)?;
    let subscriptions: String = row.column(2)?;
    let subscriptions = serde_json::from_str(&subscriptions).map_err(|e| {
        StoreError::failed(format!("corrupt MQTT session subscriptions in store: {e}"))
    })?;
    Ok((expiry_ms, disconnected_ms, subscriptions))
}

/// A position row.
pub(crate) fn position_of<R: StoredRow>(row: &R) -> Result<StoredPosition, StoreError> {
    Ok(StoredPosition {
        channel: row.column(0)?,
        epoch: row.column(1)?,
        seq: seq_from_db(row.column(2)?)?,
    })
}

/// An in-flight row (`retain` NULL: written before the store kept it).
pub(crate) fn inflight_of<R: StoredRow>(row: &R) -> Result<StoredInflight, StoreError> {
    let packet_id: i64 = row.column(0)?;
    let released: i64 = row.column(4)?;
    let qos: i64 = row.column(5)?;
    let retain: Option<i64> = row.column(6)?;
    Ok(StoredInflight {
        packet_id: u16::try_from(packet_id)
            .map_err(|_| StoreError::failed(format!("corrupt packet id {packet_id} in store")))?,
        channel: row.column(1)?,
        epoch: row.column(2)?,
        seq: seq_from_db(row.column(3)?)?,
        released: released != 0,
        qos: u8::try_from(qos)
            .ok()
            .filter(|q| matches!(q, 1 | 2))
            .ok_or_else(|| StoreError::failed(format!("corrupt QoS {qos} in store")))?,
        retain: retain.map(|r| r != 0),
    })
}

/// A held inbound QoS 2 row ([`HELD_QOS2_COLUMNS`]).
pub(crate) fn held_qos2_of<R: StoredRow>(row: &R) -> Result<StoredHeldQoS2, StoreError> {
    let packet_id: i64 = row.column(0)?;
    let n: i64 = row.column(1)?;
    Ok(StoredHeldQoS2 {
        packet_id: u16::try_from(packet_id)
            .ok()
            .filter(|id| *id != 0)
            .ok_or_else(|| StoreError::failed(format!("corrupt packet id {packet_id} in store")))?,
        n: u64::try_from(n)
            .map_err(|_| StoreError::failed(format!("corrupt QoS 2 key number {n} in store")))?,
    })
}

/// A will row ([`WILL_COLUMNS`]).
pub(crate) fn will_of<R: StoredRow>(row: &R) -> Result<StoredWill, StoreError> {
    Ok(StoredWill {
        will: row.column(0)?,
        delay_ms: row.column(1)?,
    })
}

/// A row of [`WAITING_WILLS`].
pub(crate) fn waiting_will_of<R: StoredRow>(row: &R) -> Result<WaitingWill, StoreError> {
    let key = SessionKey {
        app: app_id(row.column(0)?)?,
        client_id: row.column(1)?,
    };
    let will = StoredWill {
        will: row.column(2)?,
        delay_ms: row.column(3)?,
    };
    let disconnected_ms: Option<i64> = row.column(4)?;
    let expiry_ms: Option<i64> = row.column(5)?;
    Ok(WaitingWill::due(
        key,
        will,
        disconnected_ms.unwrap_or(0),
        expiry_ms,
    ))
}
