//! The audit log on PostgreSQL ([`AuditLog`]), with the SQLite implementation's semantics and
//! queries (`crate::common::audit`): recording an entry deletes the entries past the retention in
//! the same transaction.

use async_trait::async_trait;
use herald_core::audit::{AuditEntry, AuditLog, AuditQuery};
use herald_core::log::StoreError;
use tokio_postgres::types::ToSql;

use super::{pg_error, PostgresStore};
use crate::common::audit::{entry_of, insert_sql, pg_placeholder, select, Param};

#[async_trait]
impl AuditLog for PostgresStore {
    async fn record_audit(&self, e: &AuditEntry, prune_before: i64) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_error)?;
        let details = e.details.to_string();
        let app = e.app.as_ref().map(|a| a.as_str());
        tx.execute(
            &insert_sql(pg_placeholder),
            &[
                &e.time,
                &e.actor.role,
                &e.actor.key_id,
                &e.actor.via,
                &e.source,
                &e.user_agent,
                &e.action,
                &app,
                &e.target,
                &details,
                &e.result,
            ],
        )
        .await
        .map_err(pg_error)?;
        tx.execute("DELETE FROM audit_log WHERE time < $1", &[&prune_before])
            .await
            .map_err(pg_error)?;
        tx.commit().await.map_err(pg_error)
    }

    async fn audit_entries(&self, query: &AuditQuery) -> Result<Vec<AuditEntry>, StoreError> {
        let (sql, params) = select(query, pg_placeholder);
        let params: Vec<&(dyn ToSql + Sync)> = params
            .iter()
            .map(|p| match p {
                Param::Text(s) => s as &(dyn ToSql + Sync),
                Param::Int(i) => i as &(dyn ToSql + Sync),
            })
            .collect();
        let client = self.client().await?;
        let rows = client.query(&sql, &params).await.map_err(pg_error)?;
        rows.iter().map(entry_of).collect()
    }

    async fn prune_audit(&self, before: i64) -> Result<u64, StoreError> {
        let client = self.client().await?;
        client
            .execute("DELETE FROM audit_log WHERE time < $1", &[&before])
            .await
            .map_err(pg_error)
    }
}
