//! [`MqttSessionStore`] on PostgreSQL, with the SQLite implementation's semantics
//! (`crate::sqlite::mqtt_sessions`): a batch of writes is one transaction on a pooled
//! connection (the session service already gathers many connections' positions into one
//! batch), a read is four queries pipelined on one connection (one round trip); a hold of an
//! inbound QoS 2 message is written by its append ([`write_holds`], in the append's
//! transaction); a will is taken by one `DELETE ..
//! RETURNING`, so of the nodes that try only one gets it; a lost node's sessions are ended by one
//! `UPDATE` (`end_mqtt_node`). Deleting an app deletes its sessions.

use async_trait::async_trait;
use deadpool_postgres::{Object, Transaction};
use herald_core::log::StoreError;
use herald_core::message::{HeldPacket, SessionHold};
use herald_core::tenant::AppId;
use herald_mqtt::session::store::{
    node_name, MqttSessionStore, SessionKey, SessionWrite, StoredSession, StoredWill, WaitingWill,
};
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::{pg_error, PostgresStore};
use crate::common::mqtt_sessions::{
    held_qos2_of, inflight_of, position_of, session_header_of, subscriptions_to_json,
    waiting_will_of, will_of, HELD_QOS2_COLUMNS, INFLIGHT_COLUMNS, NODE_WILLS, POSITION_COLUMNS,
    SESSION_COLUMNS, SESSION_TABLES, SWEPT_TABLES, WAITING_WILLS, WILL_COLUMNS,
};
use crate::common::values::seq_to_db;

#[async_trait]
impl MqttSessionStore for PostgresStore {
    async fn mqtt_session(
        &self,
        app: &AppId,
        client_id: &str,
    ) -> Result<Option<StoredSession>, StoreError> {
        let client = self.client().await?;
        let key: [&(dyn ToSql + Sync); 2] = [&app.as_str(), &client_id];
        let of_session = |table: &str, columns: &str, order: &str| {
            format!("SELECT {columns} FROM {table} WHERE app = $1 AND client_id = $2{order}")
        };
        let header = of_session("mqtt_sessions", SESSION_COLUMNS, "");
        let positions = of_session(
            "mqtt_session_positions",
            POSITION_COLUMNS,
            " ORDER BY channel",
        );
        let inflight = of_session(
            "mqtt_session_inflight",
            INFLIGHT_COLUMNS,
            " ORDER BY packet_id",
        );
        let held_qos2 = of_session(
            "mqtt_session_inbound_qos2",
            HELD_QOS2_COLUMNS,
            " ORDER BY packet_id",
        );
        // The four reads go together, pipelined on the one connection (tokio-postgres sends
        // each as soon as it is polled): one round trip for the lot, not one each.
        let (header, positions, inflight, held_qos2) = tokio::try_join!(
            session_rows(&client, &header, &key),
            session_rows(&client, &positions, &key),
            session_rows(&client, &inflight, &key),
            session_rows(&client, &held_qos2, &key),
        )?;
        let Some(row) = header.first() else {
            return Ok(None);
        };
        let (expiry_ms, disconnected_ms, subscriptions) = session_header_of(row)?;
        Ok(Some(StoredSession {
            expiry_ms,
            disconnected_ms,
            subscriptions,
            positions: positions
                .iter()
                .map(position_of)
                .collect::<Result<_, _>>()?,
            inflight: inflight.iter().map(inflight_of).collect::<Result<_, _>>()?,
            held_qos2: held_qos2
                .iter()
                .map(held_qos2_of)
                .collect::<Result<_, _>>()?,
        }))
    }

    async fn write_mqtt_sessions(&self, writes: Vec<SessionWrite>) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_error)?;
        for write in &writes {
            apply(&tx, write).await?;
        }
        tx.commit().await.map_err(pg_error)
    }

    async fn take_mqtt_will(&self, key: &SessionKey) -> Result<Option<StoredWill>, StoreError> {
        let client = self.client().await?;
        let sql = format!(
            "DELETE FROM mqtt_session_wills WHERE app = $1 AND client_id = $2
             RETURNING {WILL_COLUMNS}"
        );
        let row = client
            .query_opt(&sql, &[&key.app.as_str(), &key.client_id])
            .await
            .map_err(pg_error)?;
        row.as_ref().map(will_of).transpose()
    }

    async fn mqtt_wills_waiting(&self) -> Result<Vec<WaitingWill>, StoreError> {
        let client = self.client().await?;
        client
            .query(WAITING_WILLS, &[])
            .await
            .map_err(pg_error)?
            .iter()
            .map(waiting_will_of)
            .collect()
    }

    async fn end_mqtt_node(&self, node: u64, at_ms: i64) -> Result<Vec<WaitingWill>, StoreError> {
        let node = node_name(node);
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_error)?;
        exec(
            &tx,
            "UPDATE mqtt_sessions SET disconnected_ms = $2
             WHERE node = $1 AND disconnected_ms IS NULL",
            &[&node, &at_ms],
        )
        .await?;
        let wills = tx
            .query(NODE_WILLS, &[&node])
            .await
            .map_err(pg_error)?
            .iter()
            .map(waiting_will_of)
            .collect::<Result<Vec<_>, _>>()?;
        tx.commit().await.map_err(pg_error)?;
        Ok(wills)
    }
}

/// The rows `sql` reads of the session whose app and client id are `key` (`$1`, `$2`),
/// through the connection's statement cache.
async fn session_rows(
    client: &Object,
    sql: &str,
    key: &[&(dyn ToSql + Sync); 2],
) -> Result<Vec<Row>, StoreError> {
    let statement = client.prepare_cached(sql).await.map_err(pg_error)?;
    client.query(&statement, key).await.map_err(pg_error)
}

/// Writes the sessions' QoS 2 state riding an append (core's [`SessionHold`]) inside the
/// append's transaction (`append.rs`), so it commits with the messages: first every release
/// they carry (each deleting its hold only if it still has its key number), then every hold
/// (each replacing its session's hold of the same packet id; the last of a packet id wins).
/// A statement for each, when there is any.
pub(crate) async fn write_holds(
    tx: &Transaction<'_>,
    holds: &[&SessionHold],
) -> Result<u64, tokio_postgres::Error> {
    let mut released = Unnested::default();
    for hold in holds {
        for r in &hold.released {
            released.push(hold, r.packet_id, r.n);
        }
    }
    let mut written = 0;
    if !released.ids.is_empty() {
        let statement = tx
            .prepare_cached(
                "DELETE FROM mqtt_session_inbound_qos2 AS h
                 USING unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[])
                     AS r (app, client_id, packet_id, n)
                 WHERE h.app = r.app AND h.client_id = r.client_id
                     AND h.packet_id = r.packet_id AND h.n = r.n",
            )
            .await?;
        written += tx.execute(&statement, &released.params()).await?;
    }
    let mut unique: Vec<(&SessionHold, HeldPacket)> = Vec::with_capacity(holds.len());
    for hold in holds {
        let Some(held) = hold.held else { continue };
        let same = |(h, earlier): &&mut (&SessionHold, HeldPacket)| {
            h.app == hold.app
                && h.client_id == hold.client_id
                && earlier.packet_id == held.packet_id
        };
        match unique.iter_mut().find(same) {
            Some(earlier) => *earlier = (hold, held),
            None => unique.push((hold, held)),
        }
    }
    if unique.is_empty() {
        return Ok(written);
    }
    let mut held = Unnested::default();
    for (hold, h) in unique {
        held.push(hold, h.packet_id, h.n);
    }
    let statement = tx
        .prepare_cached(
            "INSERT INTO mqtt_session_inbound_qos2 (app, client_id, packet_id, n)
             SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[])
             ON CONFLICT (app, client_id, packet_id) DO UPDATE SET n = excluded.n",
        )
        .await?;
    Ok(written + tx.execute(&statement, &held.params()).await?)
}

/// The columns of [`write_holds`]' statements, one array each.
#[derive(Default)]
struct Unnested<'a> {
    apps: Vec<&'a str>,
    clients: Vec<&'a str>,
    ids: Vec<i64>,
    ns: Vec<i64>,
}

impl<'a> Unnested<'a> {
    fn push(&mut self, hold: &'a SessionHold, packet_id: u16, n: u64) {
        self.apps.push(hold.app.as_str());
        self.clients.push(&hold.client_id);
        self.ids.push(i64::from(packet_id));
        self.ns.push(seq_to_db(n));
    }

    fn params(&self) -> [&(dyn ToSql + Sync); 4] {
        [&self.apps, &self.clients, &self.ids, &self.ns]
    }
}

async fn exec(
    tx: &Transaction<'_>,
    sql: &str,
    values: &[&(dyn ToSql + Sync)],
) -> Result<(), StoreError> {
    let statement = tx.prepare_cached(sql).await.map_err(pg_error)?;
    tx.execute(&statement, values).await.map_err(pg_error)?;
    Ok(())
}

/// Applies one write in the batch's transaction.
async fn apply(tx: &Transaction<'_>, write: &SessionWrite) -> Result<(), StoreError> {
    match write {
        SessionWrite::Start {
            key,
            expiry_ms,
            node,
        } => {
            delete_session(tx, key).await?;
            exec(
                tx,
                "INSERT INTO mqtt_sessions
                     (app, client_id, expiry_ms, disconnected_ms, subscriptions, node)
                 VALUES ($1, $2, $3, NULL, '[]', $4)",
                &[
                    &key.app.as_str(),
                    &key.client_id,
                    expiry_ms,
                    &node.map(node_name),
                ],
            )
            .await
        }
        SessionWrite::Resume {
            key,
            expiry_ms,
            node,
        } => {
            exec(
                tx,
                "UPDATE mqtt_sessions SET expiry_ms = $3, disconnected_ms = NULL, node = $4
                 WHERE app = $1 AND client_id = $2",
                &[
                    &key.app.as_str(),
                    &key.client_id,
                    expiry_ms,
                    &node.map(node_name),
                ],
            )
            .await
        }
        SessionWrite::Subscriptions { key, subscriptions } => {
            let json = subscriptions_to_json(subscriptions);
            exec(
                tx,
                "UPDATE mqtt_sessions SET subscriptions = $3 WHERE app = $1 AND client_id = $2",
                &[&key.app.as_str(), &key.client_id, &json],
            )
            .await
        }
        SessionWrite::Position { key, position } => {
            exec(
                tx,
                "INSERT INTO mqtt_session_positions (app, client_id, channel, epoch, seq)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (app, client_id, channel)
                 DO UPDATE SET epoch = excluded.epoch, seq = excluded.seq",
                &[
                    &key.app.as_str(),
                    &key.client_id,
                    &position.channel,
                    &position.epoch,
                    &seq_to_db(position.seq),
                ],
            )
            .await
        }
        SessionWrite::Unfollowed { key, channel } => {
            exec(
                tx,
                "DELETE FROM mqtt_session_positions
                 WHERE app = $1 AND client_id = $2 AND channel = $3",
                &[&key.app.as_str(), &key.client_id, channel],
            )
            .await
        }
        SessionWrite::Inflight { key, inflight } => {
            exec(
                tx,
                "INSERT INTO mqtt_session_inflight
                     (app, client_id, packet_id, channel, epoch, seq, released, qos, retain)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                 ON CONFLICT (app, client_id, packet_id) DO UPDATE SET
                     channel = excluded.channel, epoch = excluded.epoch, seq = excluded.seq,
                     released = excluded.released, qos = excluded.qos,
                     retain = excluded.retain",
                &[
                    &key.app.as_str(),
                    &key.client_id,
                    &i64::from(inflight.packet_id),
                    &inflight.channel,
                    &inflight.epoch,
                    &seq_to_db(inflight.seq),
                    &i64::from(inflight.released),
                    &i64::from(inflight.qos),
                    &inflight.retain.map(i64::from),
                ],
            )
            .await
        }
        SessionWrite::Completed { key, packet_id } => {
            exec(
                tx,
                "DELETE FROM mqtt_session_inflight
                 WHERE app = $1 AND client_id = $2 AND packet_id = $3",
                &[&key.app.as_str(), &key.client_id, &i64::from(*packet_id)],
            )
            .await
        }
        SessionWrite::ReleasedQoS2 { key, held } => {
            exec(
                tx,
                "DELETE FROM mqtt_session_inbound_qos2
                 WHERE app = $1 AND client_id = $2 AND packet_id = $3 AND n = $4",
                &[
                    &key.app.as_str(),
                    &key.client_id,
                    &i64::from(held.packet_id),
                    &seq_to_db(held.n),
                ],
            )
            .await
        }
        SessionWrite::Ended {
            key,
            at_ms,
            expiry_ms,
        } => {
            exec(
                tx,
                "UPDATE mqtt_sessions SET disconnected_ms = $3, expiry_ms = $4
                 WHERE app = $1 AND client_id = $2",
                &[&key.app.as_str(), &key.client_id, at_ms, expiry_ms],
            )
            .await
        }
        SessionWrite::Will { key, will } => {
            exec(
                tx,
                "INSERT INTO mqtt_session_wills (app, client_id, will, delay_ms)
                 VALUES ($1, $2, $3, $4)
                 ON CONFLICT (app, client_id)
                 DO UPDATE SET will = excluded.will, delay_ms = excluded.delay_ms",
                &[
                    &key.app.as_str(),
                    &key.client_id,
                    &will.will,
                    &will.delay_ms,
                ],
            )
            .await
        }
        SessionWrite::WillDiscarded { key } => {
            exec(
                tx,
                "DELETE FROM mqtt_session_wills WHERE app = $1 AND client_id = $2",
                &[&key.app.as_str(), &key.client_id],
            )
            .await
        }
        SessionWrite::Delete { key } => delete_session(tx, key).await,
        SessionWrite::AllDisconnected { at_ms } => {
            exec(
                tx,
                "UPDATE mqtt_sessions SET disconnected_ms = $1 WHERE disconnected_ms IS NULL",
                &[at_ms],
            )
            .await
        }
        SessionWrite::Sweep { now_ms } => {
            for table in SWEPT_TABLES {
                let sql = format!(
                    "DELETE FROM {table} WHERE (app, client_id) IN (
                         SELECT app, client_id FROM mqtt_sessions
                         WHERE disconnected_ms IS NOT NULL AND disconnected_ms + expiry_ms <= $1)"
                );
                exec(tx, &sql, &[now_ms]).await?;
            }
            Ok(())
        }
    }
}

/// Deletes a session's rows.
async fn delete_session(tx: &Transaction<'_>, key: &SessionKey) -> Result<(), StoreError> {
    for table in SESSION_TABLES {
        let sql = format!("DELETE FROM {table} WHERE app = $1 AND client_id = $2");
        exec(tx, &sql, &[&key.app.as_str(), &key.client_id]).await?;
    }
    Ok(())
}
