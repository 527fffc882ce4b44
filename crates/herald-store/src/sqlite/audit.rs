//! The audit log in SQLite ([`AuditLog`]): `audit_log` holds one row per admin action, newest
//! by `id`. Recording an entry also deletes the entries past the retention, in the same write
//! (one indexed delete), so the table stays bounded however few sweeps run; the server prunes
//! it periodically too. The insert, the page query and the row's decoding are shared with
//! PostgreSQL (`crate::common::audit`).

use async_trait::async_trait;
use herald_core::audit::{AuditEntry, AuditLog, AuditQuery};
use herald_core::log::StoreError;
use rusqlite::params_from_iter;

use crate::common::audit::{entry_of, insert_sql, select, sqlite_placeholder, Param};
use crate::sqlite::{backend, SqliteLog};

impl rusqlite::ToSql for Param {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        match self {
            Param::Text(s) => s.to_sql(),
            Param::Int(i) => i.to_sql(),
        }
    }
}

#[async_trait]
impl AuditLog for SqliteLog {
    async fn record_audit(&self, entry: &AuditEntry, prune_before: i64) -> Result<(), StoreError> {
        let e = entry.clone();
        self.write(move |tx| {
            tx.prepare_cached(&insert_sql(sqlite_placeholder))
                .and_then(|mut stmt| {
                    stmt.execute(rusqlite::params![
                        e.time,
                        e.actor.role,
                        e.actor.key_id,
                        e.actor.via,
                        e.source,
                        e.user_agent,
                        e.action,
                        e.app.as_ref().map(|a| a.as_str()),
                        e.target,
                        e.details.to_string(),
                        e.result,
                    ])
                })
                .map_err(backend)?;
            tx.prepare_cached("DELETE FROM audit_log WHERE time < ?1")
                .and_then(|mut stmt| stmt.execute([prune_before]))
                .map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn audit_entries(&self, query: &AuditQuery) -> Result<Vec<AuditEntry>, StoreError> {
        let (sql, params) = select(query, sqlite_placeholder);
        self.readers()
            .run(move |conn| {
                let mut stmt = conn.prepare_cached(&sql).map_err(backend)?;
                let rows = stmt
                    .query_map(params_from_iter(params.iter()), |r| Ok(entry_of(r)))
                    .map_err(backend)?;
                let mut out = Vec::new();
                for row in rows {
                    out.push(row.map_err(backend)??);
                }
                Ok(out)
            })
            .await
    }

    async fn prune_audit(&self, before: i64) -> Result<u64, StoreError> {
        self.write(move |tx| {
            let n = tx
                .execute("DELETE FROM audit_log WHERE time < ?1", [before])
                .map_err(backend)?;
            Ok(n as u64)
        })
        .await
    }
}
