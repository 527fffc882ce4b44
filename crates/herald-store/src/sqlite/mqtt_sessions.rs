//! The SQLite implementation of [`MqttSessionStore`]: MQTT persistent sessions in
//! `mqtt_sessions` (one row per app and client identifier: its expiry interval, when its
//! connection ended, its subscriptions as JSON), `mqtt_session_positions` (its position in
//! each channel; the node holding its connection), `mqtt_session_inflight` (its outbound QoS 1
//! and 2 packet identifiers awaiting acknowledgement), `mqtt_session_inbound_qos2` (its
//! inbound QoS 2 packet identifiers awaiting PUBREL, with their messages' key numbers, written
//! in the append's transaction by [`write_hold`], deleted by a later append's or a session
//! write) and
//! `mqtt_session_wills` (its connection's will, taken once by `DELETE .. RETURNING` on the
//! writer). A batch of
//! writes runs on the writer thread inside the group commit of whatever else is queued with
//! it, so the positions many connections acknowledged share one transaction and one fsync.
//! Reads use the read pool. Deleting an app deletes its sessions ([`crate::sqlite::tenancy`]).

use async_trait::async_trait;
use herald_core::log::StoreError;
use herald_core::message::SessionHold;
use herald_core::tenant::AppId;
use herald_mqtt::session::store::{
    node_name, MqttSessionStore, SessionKey, SessionWrite, StoredHeldQoS2, StoredInflight,
    StoredPosition, StoredSession, StoredWill, WaitingWill,
};
use rusqlite::{params, Connection, OptionalExtension};

use crate::common::mqtt_sessions::{
    held_qos2_of, inflight_of, position_of, session_header_of, subscriptions_to_json,
    waiting_will_of, will_of, HELD_QOS2_COLUMNS, INFLIGHT_COLUMNS, NODE_WILLS, POSITION_COLUMNS,
    SESSION_COLUMNS, SESSION_TABLES, SWEPT_TABLES, WAITING_WILLS, WILL_COLUMNS,
};
use crate::sqlite::{backend, seq_to_db, SqliteLog};

#[async_trait]
impl MqttSessionStore for SqliteLog {
    async fn mqtt_session(
        &self,
        app: &AppId,
        client_id: &str,
    ) -> Result<Option<StoredSession>, StoreError> {
        let (app, client_id) = (app.clone(), client_id.to_owned());
        self.readers()
            .run(move |conn| read_session(conn, app.as_str(), &client_id))
            .await
    }

    async fn write_mqtt_sessions(&self, writes: Vec<SessionWrite>) -> Result<(), StoreError> {
        self.write(move |conn| {
            for write in &writes {
                apply(conn, write)?;
            }
            Ok(())
        })
        .await
    }

    async fn take_mqtt_will(&self, key: &SessionKey) -> Result<Option<StoredWill>, StoreError> {
        let (app, client_id) = (key.app.as_str().to_owned(), key.client_id.clone());
        self.write(move |conn| {
            let sql = format!(
                "DELETE FROM mqtt_session_wills WHERE app = ?1 AND client_id = ?2
                 RETURNING {WILL_COLUMNS}"
            );
            conn.prepare_cached(&sql)
                .and_then(|mut stmt| {
                    stmt.query_row(params![app, client_id], |r| Ok(will_of(r)))
                        .optional()
                })
                .map_err(backend)?
                .transpose()
        })
        .await
    }

    async fn mqtt_wills_waiting(&self) -> Result<Vec<WaitingWill>, StoreError> {
        self.readers()
            .run(move |conn| {
                let mut stmt = conn.prepare_cached(WAITING_WILLS).map_err(backend)?;
                let found = stmt
                    .query_map([], |r| Ok(waiting_will_of(r)))
                    .map_err(backend)?;
                found.map(|r| r.map_err(backend)?).collect()
            })
            .await
    }

    async fn end_mqtt_node(&self, node: u64, at_ms: i64) -> Result<Vec<WaitingWill>, StoreError> {
        let node = node_name(node);
        self.write(move |conn| {
            conn.prepare_cached(
                "UPDATE mqtt_sessions SET disconnected_ms = ?2
                 WHERE node = ?1 AND disconnected_ms IS NULL",
            )
            .and_then(|mut stmt| stmt.execute(params![node, at_ms]))
            .map_err(backend)?;
            let sql = NODE_WILLS.replace("$1", "?1");
            let mut stmt = conn.prepare_cached(&sql).map_err(backend)?;
            let found = stmt
                .query_map(params![node], |r| Ok(waiting_will_of(r)))
                .map_err(backend)?;
            found.map(|r| r.map_err(backend)?).collect()
        })
        .await
    }
}

fn read_session(
    conn: &Connection,
    app: &str,
    client_id: &str,
) -> Result<Option<StoredSession>, StoreError> {
    let sql =
        format!("SELECT {SESSION_COLUMNS} FROM mqtt_sessions WHERE app = ?1 AND client_id = ?2");
    let header = conn
        .prepare_cached(&sql)
        .and_then(|mut stmt| {
            stmt.query_row(params![app, client_id], |r| Ok(session_header_of(r)))
                .optional()
        })
        .map_err(backend)?
        .transpose()?;
    let Some((expiry_ms, disconnected_ms, subscriptions)) = header else {
        return Ok(None);
    };
    let positions: Vec<StoredPosition> = rows(
        conn,
        &format!(
            "SELECT {POSITION_COLUMNS} FROM mqtt_session_positions
             WHERE app = ?1 AND client_id = ?2 ORDER BY channel"
        ),
        app,
        client_id,
        |r| position_of(r),
    )?;
    let inflight: Vec<StoredInflight> = rows(
        conn,
        &format!(
            "SELECT {INFLIGHT_COLUMNS} FROM mqtt_session_inflight
             WHERE app = ?1 AND client_id = ?2 ORDER BY packet_id"
        ),
        app,
        client_id,
        |r| inflight_of(r),
    )?;
    let held_qos2: Vec<StoredHeldQoS2> = rows(
        conn,
        &format!(
            "SELECT {HELD_QOS2_COLUMNS} FROM mqtt_session_inbound_qos2
             WHERE app = ?1 AND client_id = ?2 ORDER BY packet_id"
        ),
        app,
        client_id,
        |r| held_qos2_of(r),
    )?;
    Ok(Some(StoredSession {
        expiry_ms,
        disconnected_ms,
        subscriptions,
        positions,
        inflight,
        held_qos2,
    }))
}

fn rows<T>(
    conn: &Connection,
    sql: &str,
    app: &str,
    client_id: &str,
    decode: impl Fn(&rusqlite::Row<'_>) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    let mut stmt = conn.prepare_cached(sql).map_err(backend)?;
    let found = stmt
        .query_map(params![app, client_id], |r| Ok(decode(r)))
        .map_err(backend)?;
    found.map(|r| r.map_err(backend)?).collect()
}

/// Writes a session's QoS 2 state riding an append (core's [`SessionHold`]) inside the
/// append's transaction (`batch.rs`): the releases it carries (each deleting its hold only if
/// it still has its key number), then the hold its message takes (replacing the session's
/// hold of the same packet id). Both commit with the message.
pub(crate) fn write_hold(conn: &Connection, hold: &SessionHold) -> Result<(), StoreError> {
    let (app, client_id) = (hold.app.as_str(), hold.client_id.as_str());
    for released in &hold.released {
        delete_held(conn, app, client_id, released)?;
    }
    let Some(held) = hold.held else {
        return Ok(());
    };
    conn.prepare_cached(
        "INSERT INTO mqtt_session_inbound_qos2 (app, client_id, packet_id, n)
         VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (app, client_id, packet_id) DO UPDATE SET n = excluded.n",
    )
    .and_then(|mut stmt| {
        stmt.execute(params![
            app,
            client_id,
            i64::from(held.packet_id),
            seq_to_db(held.n)
        ])
    })
    .map(|_| ())
    .map_err(backend)
}

/// Deletes the session's hold of `released`'s packet id if it still has `released`'s key
/// number (a later message's hold of the id stays).
fn delete_held(
    conn: &Connection,
    app: &str,
    client_id: &str,
    released: &StoredHeldQoS2,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "DELETE FROM mqtt_session_inbound_qos2
         WHERE app = ?1 AND client_id = ?2 AND packet_id = ?3 AND n = ?4",
    )
    .and_then(|mut stmt| {
        stmt.execute(params![
            app,
            client_id,
            i64::from(released.packet_id),
            seq_to_db(released.n)
        ])
    })
    .map(|_| ())
    .map_err(backend)
}

/// Applies one write on the writer's connection.
fn apply(conn: &Connection, write: &SessionWrite) -> Result<(), StoreError> {
    let exec = |sql: &str, values: &[&dyn rusqlite::ToSql]| -> Result<(), StoreError> {
        conn.prepare_cached(sql)
            .and_then(|mut stmt| stmt.execute(values))
            .map(|_| ())
            .map_err(backend)
    };
    let key_of = |key: &SessionKey| (key.app.as_str().to_owned(), key.client_id.clone());
    match write {
        SessionWrite::Start {
            key,
            expiry_ms,
            node,
        } => {
            delete_session(conn, key)?;
            let (app, id) = key_of(key);
            let node = node.map(node_name);
            exec(
                "INSERT INTO mqtt_sessions
                     (app, client_id, expiry_ms, disconnected_ms, subscriptions, node)
                 VALUES (?1, ?2, ?3, NULL, '[]', ?4)",
                &[&app, &id, expiry_ms, &node],
            )
        }
        SessionWrite::Resume {
            key,
            expiry_ms,
            node,
        } => {
            let (app, id) = key_of(key);
            let node = node.map(node_name);
            exec(
                "UPDATE mqtt_sessions SET expiry_ms = ?3, disconnected_ms = NULL, node = ?4
                 WHERE app = ?1 AND client_id = ?2",
                &[&app, &id, expiry_ms, &node],
            )
        }
        SessionWrite::Subscriptions { key, subscriptions } => {
            let (app, id) = key_of(key);
            let json = subscriptions_to_json(subscriptions);
            exec(
                "UPDATE mqtt_sessions SET subscriptions = ?3 WHERE app = ?1 AND client_id = ?2",
                &[&app, &id, &json],
            )
        }
        SessionWrite::Position { key, position } => {
            let (app, id) = key_of(key);
            exec(
                "INSERT INTO mqtt_session_positions (app, client_id, channel, epoch, seq)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (app, client_id, channel)
                 DO UPDATE SET epoch = excluded.epoch, seq = excluded.seq",
                &[
                    &app,
                    &id,
                    &position.channel,
                    &position.epoch,
                    &seq_to_db(position.seq),
                ],
            )
        }
        SessionWrite::Unfollowed { key, channel } => {
            let (app, id) = key_of(key);
            exec(
                "DELETE FROM mqtt_session_positions
                 WHERE app = ?1 AND client_id = ?2 AND channel = ?3",
                &[&app, &id, channel],
            )
        }
        SessionWrite::Inflight { key, inflight } => {
            let (app, id) = key_of(key);
            exec(
                "INSERT INTO mqtt_session_inflight
                     (app, client_id, packet_id, channel, epoch, seq, released, qos, retain)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                 ON CONFLICT (app, client_id, packet_id) DO UPDATE SET
                     channel = excluded.channel, epoch = excluded.epoch, seq = excluded.seq,
                     released = excluded.released, qos = excluded.qos,
                     retain = excluded.retain",
                &[
                    &app,
                    &id,
                    &i64::from(inflight.packet_id),
                    &inflight.channel,
                    &inflight.epoch,
                    &seq_to_db(inflight.seq),
                    &i64::from(inflight.released),
                    &i64::from(inflight.qos),
                    &inflight.retain.map(i64::from),
                ],
            )
        }
        SessionWrite::Completed { key, packet_id } => {
            let (app, id) = key_of(key);
            exec(
                "DELETE FROM mqtt_session_inflight
                 WHERE app = ?1 AND client_id = ?2 AND packet_id = ?3",
                &[&app, &id, &i64::from(*packet_id)],
            )
        }
        SessionWrite::ReleasedQoS2 { key, held } => {
            delete_held(conn, key.app.as_str(), &key.client_id, held)
        }
        SessionWrite::Ended {
            key,
            at_ms,
            expiry_ms,
        } => {
            let (app, id) = key_of(key);
            exec(
                "UPDATE mqtt_sessions SET disconnected_ms = ?3, expiry_ms = ?4
                 WHERE app = ?1 AND client_id = ?2",
                &[&app, &id, at_ms, expiry_ms],
            )
        }
        SessionWrite::Will { key, will } => {
            let (app, id) = key_of(key);
            exec(
                "INSERT INTO mqtt_session_wills (app, client_id, will, delay_ms)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (app, client_id)
                 DO UPDATE SET will = excluded.will, delay_ms = excluded.delay_ms",
                &[&app, &id, &will.will, &will.delay_ms],
            )
        }
        SessionWrite::WillDiscarded { key } => {
            let (app, id) = key_of(key);
            exec(
                "DELETE FROM mqtt_session_wills WHERE app = ?1 AND client_id = ?2",
                &[&app, &id],
            )
        }
        SessionWrite::Delete { key } => delete_session(conn, key),
        SessionWrite::AllDisconnected { at_ms } => exec(
            "UPDATE mqtt_sessions SET disconnected_ms = ?1 WHERE disconnected_ms IS NULL",
            &[at_ms],
        ),
        SessionWrite::Sweep { now_ms } => {
            for table in SWEPT_TABLES {
                let sql = format!(
                    "DELETE FROM {table} WHERE (app, client_id) IN (
                         SELECT app, client_id FROM mqtt_sessions
                         WHERE disconnected_ms IS NOT NULL AND disconnected_ms + expiry_ms <= ?1)"
                );
                exec(&sql, &[now_ms])?;
            }
            Ok(())
        }
    }
}

/// Deletes a session's rows.
fn delete_session(conn: &Connection, key: &SessionKey) -> Result<(), StoreError> {
    for table in SESSION_TABLES {
        let sql = format!("DELETE FROM {table} WHERE app = ?1 AND client_id = ?2");
        conn.prepare_cached(&sql)
            .and_then(|mut stmt| stmt.execute(params![key.app.as_str(), key.client_id]))
            .map_err(backend)?;
    }
    Ok(())
}
