//! The database schema and its versioned migrations (`PRAGMA user_version`), and how the write
//! and read connections are opened and tuned.
//!
//! Tables:
//! - `channels`: one row per channel that has ever had a message: its epoch, the last seq handed
//!   out (updated in the same transaction as the messages, so a seq is never reused), the first
//!   retained seq, and the retention last asked for.
//! - `messages`: the log itself, clustered by `(channel_id, seq)`; `client_id` is the publisher's
//!   idempotency key, unique per channel when present.
//! - `api_keys`: SHA-256 hex hashes of publisher API keys, each for one app.
//! - `apps`: tenants and the secret that signs their client tokens, sealed by the server (the
//!   default app's secret is the server's token secret, not stored here).
//! - `devices` (one row per device, tags as a JSON array, inbox cursor as `EPOCH:SEQ,EPOCH:SEQ`,
//!   why a provider had it deactivated, when its token last changed) and `device_tags` (the
//!   index behind listing by tag).
//! - `device_tombstones`: where a deleted device's own log stood, so a device registered again
//!   under that id starts after it.
//! - `pushes`: receipts: how many devices a push was for and how many acknowledged it; how it
//!   is delivered, and for a provider push its delivery record (`herald_push::delivery::record`).
//! - `usage`: per-app billing counters.
//! - `jobs`: the provider job queue (`herald_push::jobs`): send jobs (one push to one device)
//!   and expand jobs (a broadcast or tag push turned into send jobs a page at a time, with its
//!   cursor), their state (`queued`, `leased`, `done`, `dead`), when they are due, attempts,
//!   whether a send may have been duplicated (`in_doubt`) and their result or last failure.
//! - `push_counts`: how a push's provider jobs stand, per counter (`done:RESULT`, `queued`,
//!   `dead`, `in_doubt`, `expanding`), kept in the same transaction as every change to `jobs`
//!   (and as every page a broadcast sends directly, whose accepted devices have no job row).
//! - `credentials`: each app's provider credentials, sealed by the server before they arrive,
//!   with the part that may be shown.
//! - `app_token_keys`: what verifies an app's client tokens besides its secret (the previous
//!   secret during a rotation's overlap, public keys, a JWKS URL).
//! - `revoked_tokens` (an app's token ids refused until their expiry) and `revoked_before` (an
//!   app's tokens issued before a time are refused): revoked client tokens.
//! - `audit_log`: admin actions (who, what, when, result; never a secret), newest by `id`.
//! - `hook_endpoints`: each app's webhook endpoints (event types and channel patterns as JSON
//!   arrays, the signing secret and a rotated one sealed by the server), with their delivery
//!   state (lease, next attempt, failures, last error, events delivered) and `queued`, the
//!   count of their queued events, kept in the same transaction as every change to
//!   `hook_events`; and its `format` (`standard` or `pusher`).
//! - `hook_events`: the queue of events per endpoint, in `(due_ms, id)` order, a held
//!   `user.offline` keyed by its user (`hold_user`), the end of the lease whose batch holds an
//!   event (`leased_until_ms`), and the dead letters (`dead`, with the reason and when).
//! - `pusher_credentials`: each app's Pusher credentials, the secrets sealed by the server.
//! - `mqtt_sessions`, `mqtt_session_positions`, `mqtt_session_inflight`: MQTT persistent
//!   sessions (expiry interval, when the connection ended, subscriptions as JSON, the cluster
//!   node holding the connection), their position in each channel and their outbound QoS 1
//!   and 2 packet ids awaiting acknowledgement.
//! - `mqtt_session_inbound_qos2`: a persistent MQTT session's inbound QoS 2 packet ids awaiting
//!   PUBREL and the number of the idempotency key each message was stored with.
//! - `mqtt_session_wills`: the will of a persistent MQTT session's connection (encoded by
//!   herald-mqtt) and its delay, from the CONNECT until it is published or discarded.
//! - `retained`: each channel's retained message (MQTT's RETAIN), or the clear that ended it,
//!   with its expiry; written in the append's transaction, never trimmed with the history.

use std::path::Path;
use std::time::Duration;

use herald_core::log::StoreError;
use rusqlite::{Connection, OpenFlags};

use crate::sqlite::backend;
use crate::sqlite::options::SyncMode;

/// Migrations in order; migration `i` moves the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: channels, messages, api keys.
    "CREATE TABLE channels (
        id INTEGER PRIMARY KEY,
        name TEXT UNIQUE NOT NULL,
        epoch TEXT NOT NULL,
        last_seq INTEGER NOT NULL,
        first_seq INTEGER NOT NULL,
        max_messages INTEGER,
        max_age_ms INTEGER
    );
    CREATE TABLE messages (
        channel_id INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        client_id TEXT NULL,
        time INTEGER NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (channel_id, seq)
    ) WITHOUT ROWID;
    CREATE UNIQUE INDEX messages_client_id ON messages (channel_id, client_id)
        WHERE client_id IS NOT NULL;
    CREATE TABLE api_keys (
        hash TEXT PRIMARY KEY,
        label TEXT,
        created INTEGER
    );",
    // 2: apps (tenants), keys per app, devices and their tags, push receipts, usage.
    "ALTER TABLE api_keys ADD COLUMN app TEXT NOT NULL DEFAULT 'default';
    CREATE TABLE apps (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        token_secret TEXT,
        limits TEXT NOT NULL DEFAULT '{}',
        deleted INTEGER NOT NULL DEFAULT 0,
        created INTEGER NOT NULL
    );
    INSERT INTO apps (id, name, created) VALUES ('default', 'default', 0);
    CREATE TABLE devices (
        app TEXT NOT NULL,
        id TEXT NOT NULL,
        platform TEXT NOT NULL,
        token TEXT,
        keys TEXT,
        user_id TEXT,
        tags TEXT NOT NULL,
        locale TEXT,
        active INTEGER NOT NULL,
        created INTEGER NOT NULL,
        updated INTEGER NOT NULL,
        cursor TEXT NOT NULL,
        PRIMARY KEY (app, id)
    ) WITHOUT ROWID;
    CREATE TABLE device_tombstones (
        app TEXT NOT NULL,
        id TEXT NOT NULL,
        log_head TEXT NOT NULL,
        PRIMARY KEY (app, id)
    ) WITHOUT ROWID;
    CREATE INDEX devices_user ON devices (app, user_id, id) WHERE user_id IS NOT NULL;
    CREATE INDEX devices_active ON devices (app, active);
    CREATE TABLE device_tags (
        app TEXT NOT NULL,
        tag TEXT NOT NULL,
        device TEXT NOT NULL,
        PRIMARY KEY (app, tag, device)
    ) WITHOUT ROWID;
    CREATE TABLE pushes (
        app TEXT NOT NULL,
        id TEXT NOT NULL,
        created INTEGER NOT NULL,
        expires INTEGER NOT NULL,
        targeted INTEGER,
        acked INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (app, id)
    ) WITHOUT ROWID;
    CREATE TABLE usage (
        app TEXT PRIMARY KEY,
        published INTEGER NOT NULL DEFAULT 0,
        deliveries INTEGER NOT NULL DEFAULT 0,
        acks INTEGER NOT NULL DEFAULT 0,
        peak_connections INTEGER NOT NULL DEFAULT 0
    );",
    // 3: the provider job queue, provider credentials, why a device is inactive and when its
    // token last changed.
    //
    // `jobs.due` is when a job may next be taken: for a queued job when it may run, for a leased
    // one when its lease runs out (the same instant as `lease_until`), so leasing is one ordered
    // scan of `jobs_due`, which holds only queued and leased jobs. Send jobs are unique per push
    // and device (expand jobs have no device), so an expansion page added twice adds nothing.
    "CREATE TABLE jobs (
        id INTEGER PRIMARY KEY,
        app TEXT NOT NULL,
        push TEXT NOT NULL,
        provider TEXT,
        kind TEXT NOT NULL CHECK (kind IN ('send', 'expand')),
        device TEXT,
        expand_after TEXT,
        state TEXT NOT NULL CHECK (state IN ('queued', 'leased', 'done', 'dead')),
        due INTEGER NOT NULL,
        lease_until INTEGER,
        attempts INTEGER NOT NULL DEFAULT 0,
        in_doubt INTEGER NOT NULL DEFAULT 0,
        result TEXT,
        seq INTEGER NOT NULL DEFAULT 0,
        created INTEGER NOT NULL,
        finished INTEGER
    );
    CREATE INDEX jobs_due ON jobs (due) WHERE state IN ('queued', 'leased');
    CREATE UNIQUE INDEX jobs_push ON jobs (app, push, device);
    CREATE INDEX jobs_depth ON jobs (app, provider, state, created) WHERE state <> 'done';
    CREATE INDEX jobs_dead ON jobs (app, id) WHERE state = 'dead';
    CREATE TABLE credentials (
        app TEXT NOT NULL,
        provider TEXT NOT NULL,
        sealed BLOB NOT NULL,
        public TEXT NOT NULL,
        updated INTEGER NOT NULL,
        PRIMARY KEY (app, provider)
    ) WITHOUT ROWID;
    ALTER TABLE devices ADD COLUMN inactive_reason TEXT;
    ALTER TABLE devices ADD COLUMN token_updated INTEGER;
    UPDATE devices SET token_updated = updated WHERE token IS NOT NULL;
    CREATE INDEX devices_provider_reachable ON devices (app, id)
        WHERE active = 1 AND platform <> 'herald' AND token IS NOT NULL;
    ALTER TABLE pushes ADD COLUMN delivery TEXT;
    ALTER TABLE pushes ADD COLUMN delivery_record BLOB;",
    // 4: counters per push, so a receipt reads a few rows instead of grouping every job of the
    // push; and where an expansion's directly sent page ends (`in_flight_until`: the devices
    // after `expand_after` up to it may have been sent when the process stopped).
    //
    // `push_counts.counter` is `done:RESULT` (finished sends by result, with or without a job
    // row), `queued` (send jobs queued or leased), `dead` (dead letters, sends and
    // expansions), `in_doubt` (send jobs whose send may have been duplicated) or `expanding`
    // (expansions queued or leased). The existing jobs are counted once here.
    "CREATE TABLE push_counts (
        app TEXT NOT NULL,
        push TEXT NOT NULL,
        counter TEXT NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (app, push, counter)
    ) WITHOUT ROWID;
    ALTER TABLE jobs ADD COLUMN in_flight_until TEXT;
    INSERT INTO push_counts (app, push, counter, n)
        SELECT app, push, counter, count(*) FROM (
            SELECT app, push, CASE
                WHEN state = 'dead' THEN 'dead'
                WHEN kind = 'expand' AND state IN ('queued', 'leased') THEN 'expanding'
                WHEN kind = 'send' AND state IN ('queued', 'leased') THEN 'queued'
                WHEN kind = 'send' AND state = 'done' THEN 'done:' || coalesce(result, '')
            END AS counter FROM jobs
            UNION ALL
            SELECT app, push, 'in_doubt' FROM jobs WHERE kind = 'send' AND in_doubt = 1
        ) WHERE counter IS NOT NULL GROUP BY app, push, counter;",
    // 5: revoked client tokens: by `jti` until `expires`, and by issue time (one per app).
    // Times are seconds since the Unix epoch.
    "CREATE TABLE revoked_tokens (
        app TEXT NOT NULL,
        jti TEXT NOT NULL,
        expires INTEGER NOT NULL,
        PRIMARY KEY (app, jti)
    ) WITHOUT ROWID;
    CREATE TABLE revoked_before (
        app TEXT PRIMARY KEY,
        issued_before INTEGER NOT NULL
    );",
    // 6: what verifies an app's client tokens besides its secret (`apps.token_secret`): the
    // previous secret during a rotation's overlap (sealed, like the secret, by the server) and
    // until when (seconds since the Unix epoch), public keys (JSON) and a JWKS URL.
    "CREATE TABLE app_token_keys (
        app TEXT PRIMARY KEY,
        previous_secret TEXT,
        previous_until INTEGER,
        public_keys TEXT NOT NULL DEFAULT '[]',
        jwks_url TEXT
    );",
    // The audit log of admin actions (`sqlite::audit`): who, what, when, result; times in ms.
    "CREATE TABLE audit_log (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        time INTEGER NOT NULL,
        actor_role TEXT NOT NULL,
        actor_key_id TEXT,
        actor_via TEXT NOT NULL,
        source TEXT,
        user_agent TEXT,
        action TEXT NOT NULL,
        app TEXT,
        target TEXT,
        details TEXT NOT NULL,
        result TEXT NOT NULL
    );
    CREATE INDEX audit_log_time ON audit_log (time);
    CREATE INDEX audit_log_app ON audit_log (app, id);",
    // Webhooks (`sqlite::hooks`): endpoints, with their delivery state and the count of their
    // queued events, and the queue of events per endpoint, with its dead letters. Times in ms.
    "CREATE TABLE hook_endpoints (
        id INTEGER PRIMARY KEY,
        app TEXT NOT NULL,
        url TEXT NOT NULL,
        description TEXT NOT NULL,
        events TEXT NOT NULL,
        channels TEXT NOT NULL,
        enabled INTEGER NOT NULL,
        offline_delay_ms INTEGER NOT NULL,
        created_ms INTEGER NOT NULL,
        secret BLOB NOT NULL,
        previous_secret BLOB,
        previous_until_ms INTEGER,
        lease_until_ms INTEGER,
        next_attempt_ms INTEGER NOT NULL DEFAULT 0,
        failures INTEGER NOT NULL DEFAULT 0,
        failing_since_ms INTEGER,
        last_error TEXT,
        delivered INTEGER NOT NULL DEFAULT 0,
        queued INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX hook_endpoints_app ON hook_endpoints (app, id);
    CREATE TABLE hook_events (
        id INTEGER PRIMARY KEY,
        app TEXT NOT NULL,
        endpoint INTEGER NOT NULL,
        event_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        due_ms INTEGER NOT NULL,
        payload TEXT NOT NULL,
        hold_user TEXT,
        dead INTEGER NOT NULL DEFAULT 0,
        reason TEXT,
        died_ms INTEGER
    );
    CREATE INDEX hook_events_due ON hook_events (endpoint, dead, due_ms, id);
    CREATE INDEX hook_events_hold ON hook_events (endpoint, hold_user) WHERE hold_user IS NOT NULL;
    CREATE INDEX hook_events_dead ON hook_events (app, id) WHERE dead = 1;",
    // Webhooks: the end of the lease whose batch holds a queued event (`NULL`: none), so the
    // user's return withdraws any held `user.offline` that is not in flight.
    "ALTER TABLE hook_events ADD COLUMN leased_until_ms INTEGER;",
    // Pusher credentials (`sqlite::pusher`): one set per app, the Pusher app id and the key
    // each unique in the server, the secret sealed by the server (with the app as associated
    // data), the secret it replaced while its overlap lasts (until, ms), created (ms).
    "CREATE TABLE pusher_credentials (
        app TEXT PRIMARY KEY,
        app_id TEXT NOT NULL UNIQUE,
        key TEXT NOT NULL UNIQUE,
        secret BLOB NOT NULL,
        previous_secret BLOB,
        previous_until_ms INTEGER,
        created_ms INTEGER NOT NULL
    );",
    // MQTT persistent sessions (`sqlite::mqtt_sessions`): one row per app and client id with
    // its Session Expiry Interval (ms), when its connection ended (ms; NULL while one holds
    // it) and its subscriptions (JSON); its position in each channel; its outbound QoS 2
    // packet ids, from before the PUBLISH is sent until PUBCOMP.
    "CREATE TABLE mqtt_sessions (
        app TEXT NOT NULL,
        client_id TEXT NOT NULL,
        expiry_ms INTEGER NOT NULL,
        disconnected_ms INTEGER,
        subscriptions TEXT NOT NULL,
        PRIMARY KEY (app, client_id)
    ) WITHOUT ROWID;
    CREATE INDEX mqtt_sessions_disconnected ON mqtt_sessions (disconnected_ms)
        WHERE disconnected_ms IS NOT NULL;
    CREATE TABLE mqtt_session_positions (
        app TEXT NOT NULL,
        client_id TEXT NOT NULL,
        channel TEXT NOT NULL,
        epoch TEXT NOT NULL,
        seq INTEGER NOT NULL,
        PRIMARY KEY (app, client_id, channel)
    ) WITHOUT ROWID;
    CREATE TABLE mqtt_session_inflight (
        app TEXT NOT NULL,
        client_id TEXT NOT NULL,
        packet_id INTEGER NOT NULL,
        channel TEXT NOT NULL,
        epoch TEXT NOT NULL,
        seq INTEGER NOT NULL,
        released INTEGER NOT NULL,
        PRIMARY KEY (app, client_id, packet_id)
    ) WITHOUT ROWID;",
    // Webhooks: an endpoint's format (`standard`: Standard Webhooks; `pusher`: Pusher's
    // webhooks, signed with the app's Pusher secret).
    "ALTER TABLE hook_endpoints ADD COLUMN format TEXT NOT NULL DEFAULT 'standard';",
    // MQTT wills (`sqlite::mqtt_sessions`): the will of a persistent session's connection
    // (encoded by herald-mqtt) and its Will Delay Interval (ms), from the CONNECT until it is
    // published or discarded, so one waiting for its delay survives a crash.
    "CREATE TABLE mqtt_session_wills (
        app TEXT NOT NULL,
        client_id TEXT NOT NULL,
        will BLOB NOT NULL,
        delay_ms INTEGER NOT NULL,
        PRIMARY KEY (app, client_id)
    ) WITHOUT ROWID;",
    // MQTT sessions across a cluster (`sqlite::mqtt_sessions`): the node holding (or that last
    // held) a session's connection, so a node found lost has its sessions ended by another;
    // the QoS of each in-flight packet id, now kept for outbound QoS 1 messages too (the rows
    // before were all QoS 2).
    "ALTER TABLE mqtt_sessions ADD COLUMN node TEXT;
    CREATE INDEX mqtt_sessions_node ON mqtt_sessions (node) WHERE node IS NOT NULL;
    ALTER TABLE mqtt_session_inflight ADD COLUMN qos INTEGER NOT NULL DEFAULT 2;",
    // Retained messages (`sqlite::retained`): per channel (its full name), the message last
    // appended with `Retain::Keep`, or the clear that ended it (`cleared`, kept so that a write
    // with a lower seq never brings an older one back), with its expiry. Apart from
    // `messages`: trimming a channel's history leaves it.
    "CREATE TABLE retained (
        channel TEXT PRIMARY KEY,
        epoch TEXT NOT NULL,
        seq INTEGER NOT NULL,
        client_id TEXT NULL,
        time INTEGER NOT NULL,
        data BLOB NOT NULL,
        expires_at_ms INTEGER NULL,
        cleared INTEGER NOT NULL
    ) WITHOUT ROWID;",
    // MQTT inbound QoS 2 (`sqlite::mqtt_sessions`): a persistent session's packet ids of
    // QoS 2 messages stored and answered with PUBREC, awaiting PUBREL, with the number `n` of
    // the idempotency key each message was stored with, so a resend after a restart or on
    // another node is not stored twice.
    "CREATE TABLE mqtt_session_inbound_qos2 (
        app TEXT NOT NULL,
        client_id TEXT NOT NULL,
        packet_id INTEGER NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (app, client_id, packet_id)
    ) WITHOUT ROWID;",
    // MQTT in-flight RETAIN (`sqlite::mqtt_sessions`): whether an outbound QoS 1 or 2 message
    // in flight went with RETAIN set, so its resend on resume goes as it went; NULL for the
    // rows written before, whose RETAIN herald-mqtt works out as it did.
    "ALTER TABLE mqtt_session_inflight ADD COLUMN retain INTEGER;",
];

/// The schema version this build writes.
pub(crate) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// How long a connection waits for a lock held by another connection before failing.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Opens the write connection, switches the database to WAL and runs pending migrations.
pub(crate) fn open_writer(
    path: &Path,
    sync: SyncMode,
    wal_limit_bytes: u64,
) -> Result<Connection, StoreError> {
    let mut conn = Connection::open(path)
        .map_err(|e| StoreError::backend(format!("cannot open {}", path.display()), e))?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(backend)?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))
        .map_err(backend)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::failed(format!(
            "cannot switch {} to WAL mode (got {mode})",
            path.display()
        )));
    }
    let synchronous = match sync {
        SyncMode::Always | SyncMode::Batch => "FULL",
        SyncMode::Off => "OFF",
    };
    conn.pragma_update(None, "synchronous", synchronous)
        .map_err(backend)?;
    conn.pragma_update(None, "temp_store", "MEMORY")
        .map_err(backend)?;
    // Checkpoints run on their own thread (checkpoint.rs), never inside a group commit.
    conn.pragma_update(None, "wal_autocheckpoint", 0)
        .map_err(backend)?;
    // When a commit starts the log again from the beginning, a file grown past this by a burst
    // is cut back to it.
    conn.pragma_update(None, "journal_size_limit", wal_limit_bytes as i64)
        .map_err(backend)?;
    conn.set_prepared_statement_cache_capacity(32);
    migrate(&mut conn)?;
    Ok(conn)
}

/// Opens a read-only connection (the writer must have created the database already).
pub(crate) fn open_reader(path: &Path) -> Result<Connection, StoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)
        .map_err(|e| StoreError::backend(format!("cannot open {}", path.display()), e))?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(backend)?;
    conn.set_prepared_statement_cache_capacity(32);
    Ok(conn)
}

/// Brings the schema up to [`SCHEMA_VERSION`], one transaction per migration.
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let current: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(backend)?;
    if current > SCHEMA_VERSION {
        return Err(StoreError::failed(format!(
            "database schema version {current} is newer than this Herald supports \
             ({SCHEMA_VERSION}); upgrade Herald"
        )));
    }
    let start = usize::try_from(current)
        .map_err(|_| StoreError::failed(format!("invalid schema version {current}")))?;
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(start) {
        let version = index + 1;
        let tx = conn.transaction().map_err(backend)?;
        tx.execute_batch(sql)
            .map_err(|e| StoreError::backend(format!("migration to version {version}"), e))?;
        tx.pragma_update(None, "user_version", version as i64)
            .map_err(backend)?;
        tx.commit().map_err(backend)?;
        tracing::info!(version, "store schema migrated");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(conn: &Connection) -> i64 {
        conn.query_row("PRAGMA user_version", [], |row| row.get(0))
            .unwrap()
    }

    #[test]
    fn migrates_once_and_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let mut conn = open_writer(&path, SyncMode::Batch, 1 << 20).unwrap();
        assert_eq!(version(&conn), SCHEMA_VERSION);
        migrate(&mut conn).unwrap();
        assert_eq!(version(&conn), SCHEMA_VERSION);
        let mode: String = conn
            .query_row("PRAGMA journal_mode", [], |row| row.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
    }

    #[test]
    fn refuses_a_newer_schema() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let conn = open_writer(&path, SyncMode::Off, 1 << 20).unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        drop(conn);
        let err = open_writer(&path, SyncMode::Off, 1 << 20).unwrap_err();
        assert!(err.to_string().contains("newer"), "{err}");
    }

    #[test]
    fn migration_3_dates_existing_tokens_from_their_last_update() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let mut conn = Connection::open(&path).unwrap();
        for sql in &MIGRATIONS[..2] {
            conn.execute_batch(sql).unwrap();
        }
        conn.pragma_update(None, "user_version", 2).unwrap();
        let insert = "INSERT INTO devices (app, id, platform, token, tags, active, created,
                      updated, cursor) VALUES ('default', ?1, ?2, ?3, '[]', 1, 1, ?4, '')";
        conn.execute(insert, rusqlite::params!["p", "apns", "ab", 42])
            .unwrap();
        conn.execute(insert, rusqlite::params!["h", "herald", None::<String>, 43])
            .unwrap();
        migrate(&mut conn).unwrap();
        assert_eq!(version(&conn), SCHEMA_VERSION);
        let stamp = |id: &str| -> Option<i64> {
            conn.query_row(
                "SELECT token_updated FROM devices WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
            .unwrap()
        };
        assert_eq!(stamp("p"), Some(42));
        assert_eq!(stamp("h"), None);
    }

    #[test]
    fn client_id_is_unique_per_channel_only_when_present() {
        let dir = tempfile::tempdir().unwrap();
        let conn = open_writer(&dir.path().join("t.db"), SyncMode::Off, 1 << 20).unwrap();
        let insert = "INSERT INTO messages (channel_id, seq, client_id, time, data) \
                      VALUES (?1, ?2, ?3, 0, x'')";
        conn.execute(insert, rusqlite::params![1, 1, None::<String>])
            .unwrap();
        conn.execute(insert, rusqlite::params![1, 2, None::<String>])
            .unwrap();
        conn.execute(insert, rusqlite::params![1, 3, "k"]).unwrap();
        conn.execute(insert, rusqlite::params![2, 1, "k"]).unwrap();
        assert!(conn.execute(insert, rusqlite::params![1, 4, "k"]).is_err());
    }
}
