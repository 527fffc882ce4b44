//! The audit log of admin actions as both backends store it: `audit_log` holds one row per
//! action, newest by `id`. The insert and the page query are built here once, for either
//! placeholder style ([`insert_sql`], [`select`]), and a row read back once ([`entry_of`]).

use herald_core::audit::{Actor, AuditEntry, AuditQuery};
use herald_core::log::StoreError;

use super::row::StoredRow;
use super::values::app_id;

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

/// An `audit_log` row ([`COLUMNS`]) as an entry.
pub(crate) fn entry_of(row: &impl StoredRow) -> Result<AuditEntry, StoreError> {
    let details: String = row.column(10)?;
    let app: Option<String> = row.column(8)?;
    let id: i64 = row.column(0)?;
    Ok(AuditEntry {
        id: u64::try_from(id).unwrap_or(0),
        time: row.column(1)?,
        actor: Actor {
            role: row.column(2)?,
            key_id: row.column(3)?,
            via: row.column(4)?,
        },
        source: row.column(5)?,
        user_agent: row.column(6)?,
        action: row.column(7)?,
        app: app.map(app_id).transpose()?,
        target: row.column(9)?,
        details: serde_json::from_str(&details).unwrap_or(serde_json::Value::Null),
        result: row.column(11)?,
    })
}

/// SQLite's placeholder for parameter `n` (`?n`).
pub(crate) fn sqlite_placeholder(n: usize) -> String {
    format!("?{n}")
}

/// PostgreSQL's placeholder for parameter `n` (`$n`).
pub(crate) fn pg_placeholder(n: usize) -> String {
    format!("${n}")
}
