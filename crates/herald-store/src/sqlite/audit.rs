//! The audit log in SQLite ([`AuditLog`]): `audit_log` holds one row per admin action, newest
//! by `id`. Recording an entry also deletes the entries past the retention, in the same write
//! (one indexed delete), so the table stays bounded however few sweeps run; the server prunes
//! it periodically too. The query is built here once for both stores ([`select`]).

use async_trait::async_trait;
use herald_core::audit::{Actor, AuditEntry, AuditLog, AuditQuery};
use herald_core::log::StoreError;
use rusqlite::params_from_iter;

use crate::sqlite::tenancy::app_id;
use crate::sqlite::{backend, SqliteLog};

/// The columns of an entry, in the order [`select`] reads them.
pub(crate) const COLUMNS: &str = "id, time, actor_role, actor_key_id, actor_via, source, \
     user_agent, action, app, target, details, result";

/// The insert (no id: the store assigns it), with placeholders written by `placeholder(n)`.
pub(crate) fn insert_sql(placeholder: fn(usize) -> String) -> String {
    let values: Vec<String> = (1..=11).map(placeholder).collect();
    format!(
        "INSERT INTO audit_log (time, actor_role, actor_key_id, actor_via, source, user_agent, \
         action, app, target, details, result) VALUES ({})",
        values.join(", ")
    )
}

/// One query parameter of [`select`].
pub(crate) enum Param {
    Text(String),
    Int(i64),
}

/// The page query for `query`: SQL with placeholders written by `placeholder(n)`, and its
/// parameters in order.
pub(crate) fn select(query: &AuditQuery, placeholder: fn(usize) -> String) -> (String, Vec<Param>) {
    let mut conditions = Vec::new();
    let mut params = Vec::new();
    let mut add = |column: &str, op: &str, param: Param| {
        params.push(param);
        conditions.push(format!("{column} {op} {}", placeholder(params.len())));
    };
    if let Some(app) = &query.app {
        add("app", "=", Param::Text(app.as_str().to_owned()));
    }
    if let Some(action) = &query.action {
        add("action", "=", Param::Text(action.clone()));
    }
    if let Some(since) = query.since {
        add("time", ">=", Param::Int(since));
    }
    if let Some(until) = query.until {
        add("time", "<", Param::Int(until));
    }
    if let Some(before) = query.before_id {
        add(
            "id",
            "<",
            Param::Int(i64::try_from(before).unwrap_or(i64::MAX)),
        );
    }
    let filter = if conditions.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conditions.join(" AND "))
    };
    params.push(Param::Int(i64::try_from(query.limit).unwrap_or(i64::MAX)));
    let sql = format!(
        "SELECT {COLUMNS} FROM audit_log{filter} ORDER BY id DESC LIMIT {}",
        placeholder(params.len())
    );
    (sql, params)
}

/// The columns of an `audit_log` row, as read.
pub(crate) type Row = (
    i64,
    i64,
    String,
    Option<String>,
    String,
    Option<String>,
    Option<String>,
    String,
    Option<String>,
    Option<String>,
    String,
    String,
);

/// An entry read back from its columns.
pub(crate) fn entry(row: Row) -> Result<AuditEntry, StoreError> {
    let (id, time, role, key_id, via, source, user_agent, action, app, target, details, result) =
        row;
    Ok(AuditEntry {
        id: u64::try_from(id).unwrap_or(0),
        time,
        actor: Actor { role, key_id, via },
        source,
        user_agent,
        action,
        app: app.map(app_id).transpose()?,
        target,
        details: serde_json::from_str(&details).unwrap_or(serde_json::Value::Null),
        result,
    })
}

fn sqlite_placeholder(n: usize) -> String {
    format!("?{n}")
}

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
                    .query_map(params_from_iter(params.iter()), |r| {
                        Ok((
                            r.get(0)?,
                            r.get(1)?,
                            r.get(2)?,
                            r.get(3)?,
                            r.get(4)?,
                            r.get(5)?,
                            r.get(6)?,
                            r.get(7)?,
                            r.get(8)?,
                            r.get(9)?,
                            r.get(10)?,
                            r.get(11)?,
                        ))
                    })
                    .map_err(backend)?;
                let mut out = Vec::new();
                for row in rows {
                    out.push(entry(row.map_err(backend)?)?);
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
