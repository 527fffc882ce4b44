//! The audit log as stored: one [`AuditEntry`] per admin action (who acted, with which
//! credential and from where; what they did to what; when; and how it ended), never a secret.
//! `herald-api` decides which calls are admin actions and records them; `herald-store`
//! implements [`AuditLog`] in SQLite and PostgreSQL, newest first, bounded by a retention.

use async_trait::async_trait;
use serde::Serialize;

use crate::log::StoreError;
use crate::tenant::AppId;

/// Longest text kept in a free-form field of an entry (a user agent, a target named in a path):
/// longer values are cut at a character boundary, so a client cannot grow the log at will.
pub const MAX_FIELD_CHARS: usize = 200;

/// Cuts `text` to [`MAX_FIELD_CHARS`] characters.
pub fn clip(text: &str) -> String {
    text.chars().take(MAX_FIELD_CHARS).collect()
}

/// Who acted: the role of the credential, which one (never the credential itself), and how it
/// was presented.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Actor {
    /// `admin` (the admin key), `publisher` (an app's publisher key) or `anonymous` (a log-in
    /// with a key that is not valid).
    pub role: String,
    /// For a publisher key, its key id (the first 12 hex digits of its SHA-256 hash, as
    /// `GET /v1/apps/{id}/keys` lists it); `None` for the admin key and for anonymous callers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// `bearer` (`Authorization` header), `session` (the dashboard's cookie) or `login` (the key
    /// sent to `POST /admin/session`).
    pub via: String,
}

/// One admin action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditEntry {
    /// The entry's id, increasing in the order entries are recorded (0 before it is stored);
    /// pages are cut by it.
    pub id: u64,
    /// Server time when the action ended, milliseconds since the Unix epoch.
    pub time: i64,
    /// Who acted.
    pub actor: Actor,
    /// The address the request came from (`ip:port` of the TCP peer), if known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The request's `User-Agent`, cut to [`MAX_FIELD_CHARS`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    /// What was done, e.g. `app.delete` (docs/security.md lists them).
    pub action: String,
    /// The app the action concerns; `None` for actions on the server itself (a log-in).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app: Option<AppId>,
    /// What was acted on within the app: a key id, a device id, a provider, a job id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Non-secret details (a JSON object: limits set, a key's label, what a revocation named).
    pub details: serde_json::Value,
    /// `ok`, or the error code the request was answered with.
    pub result: String,
}

/// Which entries a query asks for, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// Only entries about this app.
    pub app: Option<AppId>,
    /// Only entries of this action.
    pub action: Option<String>,
    /// Only entries at or after this time (ms).
    pub since: Option<i64>,
    /// Only entries before this time (ms).
    pub until: Option<i64>,
    /// Only entries older than this id (the previous page's last id).
    pub before_id: Option<u64>,
    /// Most entries answered.
    pub limit: usize,
}

/// The audit log, as stored.
#[async_trait]
pub trait AuditLog: Send + Sync {
    /// Stores an entry (its `id` is assigned) and deletes the entries older than
    /// `prune_before` (ms), in one write.
    async fn record_audit(&self, entry: &AuditEntry, prune_before: i64) -> Result<(), StoreError>;
    /// The entries the query asks for, newest (highest id) first.
    async fn audit_entries(&self, query: &AuditQuery) -> Result<Vec<AuditEntry>, StoreError>;
    /// Deletes the entries older than `before` (ms); answers how many.
    async fn prune_audit(&self, before: i64) -> Result<u64, StoreError>;
}
