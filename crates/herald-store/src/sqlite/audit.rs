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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use herald_core::audit::Actor;
    use herald_core::log::{ChannelLog, CommitSink};
    use herald_core::message::SharedMessage;
    use herald_core::tenant::AppId;

    use super::*;
    use crate::sqlite::SqliteOptions;

    struct NoSink;

    impl CommitSink for NoSink {
        fn committed(&self, _: &[SharedMessage]) {}
    }

    fn entry_at(time: i64, app: &str, action: &str) -> AuditEntry {
        AuditEntry {
            id: 0,
            time,
            actor: Actor {
                role: "admin".into(),
                key_id: None,
                via: "bearer".into(),
            },
            source: Some("127.0.0.1:1".into()),
            user_agent: None,
            action: action.into(),
            app: Some(AppId::parse(app).unwrap()),
            target: None,
            details: serde_json::json!({}),
            result: "ok".into(),
        }
    }

    #[tokio::test]
    async fn entries_page_newest_first_filter_and_prune() {
        let dir = tempfile::tempdir().unwrap();
        let log = SqliteLog::open(dir.path(), SqliteOptions::default(), Arc::new(NoSink)).unwrap();
        for (t, app, action) in [
            (10, "a", "x"),
            (20, "b", "x"),
            (30, "a", "y"),
            (40, "a", "x"),
        ] {
            log.record_audit(&entry_at(t, app, action), 0)
                .await
                .unwrap();
        }
        let all = |q: AuditQuery| {
            let log = &log;
            async move { log.audit_entries(&q).await.unwrap() }
        };
        let times = |v: Vec<AuditEntry>| v.iter().map(|e| e.time).collect::<Vec<_>>();
        let q = AuditQuery {
            limit: 2,
            ..AuditQuery::default()
        };
        let first = all(q.clone()).await;
        assert_eq!(times(first.clone()), vec![40, 30]);
        let next = all(AuditQuery {
            before_id: Some(first[1].id),
            ..q.clone()
        })
        .await;
        assert_eq!(times(next), vec![20, 10]);
        let filtered = all(AuditQuery {
            app: Some(AppId::parse("a").unwrap()),
            action: Some("x".into()),
            since: Some(10),
            until: Some(40),
            limit: 10,
            ..AuditQuery::default()
        })
        .await;
        assert_eq!(times(filtered), vec![10]);
        assert_eq!(log.prune_audit(25).await.unwrap(), 2);
        log.record_audit(&entry_at(50, "a", "x"), 35).await.unwrap();
        assert_eq!(
            times(
                all(AuditQuery {
                    limit: 10,
                    ..AuditQuery::default()
                })
                .await
            ),
            vec![50, 40]
        );
        log.close().await;
    }
}
