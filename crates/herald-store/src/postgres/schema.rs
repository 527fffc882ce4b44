//! The PostgreSQL schema and its versioned migrations.
//!
//! The tables mirror the SQLite ones (`crate::schema` says what each holds), in PostgreSQL's
//! types: `BIGINT` times and seqs, `BYTEA` payloads, `BOOLEAN` flags. The version lives in
//! `herald_schema` (one row). Text keys that are listed in order or paged by `>` use the `C`
//! collation, so they sort by bytes as SQLite's do, whatever the database's locale. Migrations
//! run in one transaction that first takes a transaction-scoped advisory lock, so nodes starting
//! together run them once, one after the other: the second finds the schema current and does
//! nothing.
//!
//! Version 1 holds what SQLite's versions 1 to 3 hold; version 2 what SQLite's version 4 adds
//! (`push_counts`, `jobs.in_flight_until`); version 3 what SQLite's version 5 adds (`revoked_tokens`,
//! `revoked_before`); the next what SQLite's `audit_log` migration adds (`audit_log`); the next
//! what SQLite's webhooks migration adds (`hook_endpoints`, `hook_events`); the next what its
//! next migration adds (`hook_events.leased_until_ms`); the next what its Pusher credentials
//! migration adds (`pusher_credentials`); the later ones what SQLite's migrations of the same
//! names add (MQTT sessions, the webhook format, MQTT wills, MQTT sessions across a cluster).

use herald_core::log::StoreError;
use tokio_postgres::Client;

use super::pg_error;

/// The advisory lock key that serialises migrations (`"herald-m"` as a big-endian integer).
const MIGRATION_LOCK: i64 = 0x6865_7261_6c64_2d6d;

/// Migrations in order; migration `i` moves the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: everything SQLite's versions 1 to 3 hold.
    r#"CREATE TABLE channels (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        name TEXT COLLATE "C" UNIQUE NOT NULL,
        epoch TEXT NOT NULL,
        last_seq BIGINT NOT NULL,
        first_seq BIGINT NOT NULL,
        max_messages BIGINT NOT NULL,
        max_age_ms BIGINT NOT NULL
    );
    CREATE TABLE messages (
        channel_id BIGINT NOT NULL,
        seq BIGINT NOT NULL,
        client_id TEXT NULL,
        time BIGINT NOT NULL,
        data BYTEA NOT NULL,
        PRIMARY KEY (channel_id, seq)
    );
    CREATE UNIQUE INDEX messages_client_id ON messages (channel_id, client_id)
        WHERE client_id IS NOT NULL;
    CREATE TABLE api_keys (
        hash TEXT PRIMARY KEY,
        label TEXT,
        created BIGINT,
        app TEXT COLLATE "C" NOT NULL DEFAULT 'default'
    );
    CREATE TABLE apps (
        id TEXT COLLATE "C" PRIMARY KEY,
        name TEXT NOT NULL,
        token_secret TEXT,
        limits TEXT NOT NULL DEFAULT '{}',
        deleted BOOLEAN NOT NULL DEFAULT FALSE,
        created BIGINT NOT NULL
    );
    INSERT INTO apps (id, name, created) VALUES ('default', 'default', 0);
    CREATE TABLE devices (
        app TEXT NOT NULL,
        id TEXT COLLATE "C" NOT NULL,
        platform TEXT NOT NULL,
        token TEXT,
        keys TEXT,
        user_id TEXT,
        tags TEXT NOT NULL,
        locale TEXT,
        active BOOLEAN NOT NULL,
        created BIGINT NOT NULL,
        updated BIGINT NOT NULL,
        cursor TEXT NOT NULL,
        inactive_reason TEXT,
        token_updated BIGINT,
        PRIMARY KEY (app, id)
    );
    CREATE TABLE device_tombstones (
        app TEXT NOT NULL,
        id TEXT NOT NULL,
        log_head TEXT NOT NULL,
        PRIMARY KEY (app, id)
    );
    CREATE INDEX devices_user ON devices (app, user_id, id) WHERE user_id IS NOT NULL;
    CREATE INDEX devices_active ON devices (app, active);
    CREATE INDEX devices_provider_reachable ON devices (app, id)
        WHERE active AND platform <> 'herald' AND token IS NOT NULL;
    CREATE TABLE device_tags (
        app TEXT NOT NULL,
        tag TEXT NOT NULL,
        device TEXT COLLATE "C" NOT NULL,
        PRIMARY KEY (app, tag, device)
    );
    CREATE TABLE pushes (
        app TEXT NOT NULL,
        id TEXT NOT NULL,
        created BIGINT NOT NULL,
        expires BIGINT NOT NULL,
        targeted BIGINT,
        acked BIGINT NOT NULL DEFAULT 0,
        delivery TEXT,
        delivery_record BYTEA,
        PRIMARY KEY (app, id)
    );
    CREATE TABLE usage (
        app TEXT PRIMARY KEY,
        published BIGINT NOT NULL DEFAULT 0,
        deliveries BIGINT NOT NULL DEFAULT 0,
        acks BIGINT NOT NULL DEFAULT 0,
        peak_connections BIGINT NOT NULL DEFAULT 0
    );
    CREATE TABLE jobs (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        app TEXT NOT NULL,
        push TEXT NOT NULL,
        provider TEXT,
        kind TEXT NOT NULL CHECK (kind IN ('send', 'expand')),
        device TEXT COLLATE "C",
        expand_after TEXT,
        state TEXT NOT NULL CHECK (state IN ('queued', 'leased', 'done', 'dead')),
        due BIGINT NOT NULL,
        lease_until BIGINT,
        attempts BIGINT NOT NULL DEFAULT 0,
        in_doubt BOOLEAN NOT NULL DEFAULT FALSE,
        result TEXT,
        seq BIGINT NOT NULL DEFAULT 0,
        created BIGINT NOT NULL,
        finished BIGINT
    );
    CREATE INDEX jobs_due ON jobs (due, id) WHERE state IN ('queued', 'leased');
    CREATE UNIQUE INDEX jobs_push ON jobs (app, push, device);
    CREATE INDEX jobs_depth ON jobs (app, provider, state, created) WHERE state <> 'done';
    CREATE INDEX jobs_dead ON jobs (app, id) WHERE state = 'dead';
    CREATE TABLE credentials (
        app TEXT NOT NULL,
        provider TEXT COLLATE "C" NOT NULL,
        sealed BYTEA NOT NULL,
        public TEXT NOT NULL,
        updated BIGINT NOT NULL,
        PRIMARY KEY (app, provider)
    );"#,
    // 2: what SQLite's version 4 adds: counters per push, so a receipt reads a few rows
    // instead of grouping every job of the push, and where an expansion's directly sent page
    // ends (`in_flight_until`: the devices after `expand_after` up to it may have been sent
    // when the process stopped). `counter` sorts by bytes, so a receipt lists its results in
    // the order SQLite does; `in_flight_until` compares by bytes, as device ids do. The
    // existing jobs are counted once here.
    r#"CREATE TABLE push_counts (
        app TEXT NOT NULL,
        push TEXT NOT NULL,
        counter TEXT COLLATE "C" NOT NULL,
        n BIGINT NOT NULL,
        PRIMARY KEY (app, push, counter)
    );
    ALTER TABLE jobs ADD COLUMN in_flight_until TEXT COLLATE "C";
    INSERT INTO push_counts (app, push, counter, n)
        SELECT app, push, counter, count(*) FROM (
            SELECT app, push, CASE
                WHEN state = 'dead' THEN 'dead'
                WHEN kind = 'expand' AND state IN ('queued', 'leased') THEN 'expanding'
                WHEN kind = 'send' AND state IN ('queued', 'leased') THEN 'queued'
                WHEN kind = 'send' AND state = 'done' THEN 'done:' || coalesce(result, '')
            END AS counter FROM jobs
            UNION ALL
            SELECT app, push, 'in_doubt' FROM jobs WHERE kind = 'send' AND in_doubt
        ) AS standing WHERE counter IS NOT NULL GROUP BY app, push, counter;"#,
    // 3: what SQLite's version 5 adds: revoked client tokens, by `jti` until `expires` and by
    // issue time (one per app), in seconds since the Unix epoch.
    r#"CREATE TABLE revoked_tokens (
        app TEXT NOT NULL,
        jti TEXT NOT NULL,
        expires BIGINT NOT NULL,
        PRIMARY KEY (app, jti)
    );
    CREATE TABLE revoked_before (
        app TEXT PRIMARY KEY,
        issued_before BIGINT NOT NULL
    );"#,
    // 4: what SQLite's version 6 adds: what verifies an app's client tokens besides its
    // secret (the previous secret during a rotation's overlap, sealed by the server, and until
    // when; public keys as JSON; a JWKS URL).
    r#"CREATE TABLE app_token_keys (
        app TEXT COLLATE "C" PRIMARY KEY,
        previous_secret TEXT,
        previous_until BIGINT,
        public_keys TEXT NOT NULL DEFAULT '[]',
        jwks_url TEXT
    );"#,
    // What SQLite's `audit_log` migration adds: the audit log of admin actions.
    r#"CREATE TABLE audit_log (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        time BIGINT NOT NULL,
        actor_role TEXT NOT NULL,
        actor_key_id TEXT,
        actor_via TEXT NOT NULL,
        source TEXT,
        user_agent TEXT,
        action TEXT NOT NULL,
        app TEXT COLLATE "C",
        target TEXT,
        details TEXT NOT NULL,
        result TEXT NOT NULL
    );
    CREATE INDEX audit_log_time ON audit_log (time);
    CREATE INDEX audit_log_app ON audit_log (app, id);"#,
    // What SQLite's webhooks migration adds: endpoints with their delivery state and the count
    // of their queued events, and the queue of events per endpoint with its dead letters.
    r#"CREATE TABLE hook_endpoints (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        app TEXT COLLATE "C" NOT NULL,
        url TEXT NOT NULL,
        description TEXT NOT NULL,
        events TEXT NOT NULL,
        channels TEXT NOT NULL,
        enabled BOOLEAN NOT NULL,
        offline_delay_ms BIGINT NOT NULL,
        created_ms BIGINT NOT NULL,
        secret BYTEA NOT NULL,
        previous_secret BYTEA,
        previous_until_ms BIGINT,
        lease_until_ms BIGINT,
        next_attempt_ms BIGINT NOT NULL DEFAULT 0,
        failures BIGINT NOT NULL DEFAULT 0,
        failing_since_ms BIGINT,
        last_error TEXT,
        delivered BIGINT NOT NULL DEFAULT 0,
        queued BIGINT NOT NULL DEFAULT 0
    );
    CREATE INDEX hook_endpoints_app ON hook_endpoints (app, id);
    CREATE TABLE hook_events (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        app TEXT COLLATE "C" NOT NULL,
        endpoint BIGINT NOT NULL,
        event_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        due_ms BIGINT NOT NULL,
        payload TEXT NOT NULL,
        hold_user TEXT,
        dead BOOLEAN NOT NULL DEFAULT FALSE,
        reason TEXT,
        died_ms BIGINT
    );
    CREATE INDEX hook_events_due ON hook_events (endpoint, dead, due_ms, id);
    CREATE INDEX hook_events_hold ON hook_events (endpoint, hold_user) WHERE hold_user IS NOT NULL;
    CREATE INDEX hook_events_dead ON hook_events (app, id) WHERE dead;"#,
    // What SQLite's next webhooks migration adds: the end of the lease whose batch holds a
    // queued event.
    "ALTER TABLE hook_events ADD COLUMN leased_until_ms BIGINT;",
    // What SQLite's Pusher credentials migration adds: one set per app, the Pusher app id and
    // the key each unique, the secrets sealed by the server.
    r#"CREATE TABLE pusher_credentials (
        app TEXT COLLATE "C" PRIMARY KEY,
        app_id TEXT COLLATE "C" NOT NULL UNIQUE,
        key TEXT COLLATE "C" NOT NULL UNIQUE,
        secret BYTEA NOT NULL,
        previous_secret BYTEA,
        previous_until_ms BIGINT,
        created_ms BIGINT NOT NULL
    );"#,
    // What SQLite's MQTT sessions migration adds: sessions, their positions, their outbound
    // QoS 2 packet ids.
    r#"CREATE TABLE mqtt_sessions (
        app TEXT COLLATE "C" NOT NULL,
        client_id TEXT COLLATE "C" NOT NULL,
        expiry_ms BIGINT NOT NULL,
        disconnected_ms BIGINT,
        subscriptions TEXT NOT NULL,
        PRIMARY KEY (app, client_id)
    );
    CREATE INDEX mqtt_sessions_disconnected ON mqtt_sessions (disconnected_ms)
        WHERE disconnected_ms IS NOT NULL;
    CREATE TABLE mqtt_session_positions (
        app TEXT COLLATE "C" NOT NULL,
        client_id TEXT COLLATE "C" NOT NULL,
        channel TEXT COLLATE "C" NOT NULL,
        epoch TEXT NOT NULL,
        seq BIGINT NOT NULL,
        PRIMARY KEY (app, client_id, channel)
    );
    CREATE TABLE mqtt_session_inflight (
        app TEXT COLLATE "C" NOT NULL,
        client_id TEXT COLLATE "C" NOT NULL,
        packet_id BIGINT NOT NULL,
        channel TEXT COLLATE "C" NOT NULL,
        epoch TEXT NOT NULL,
        seq BIGINT NOT NULL,
        released BIGINT NOT NULL,
        PRIMARY KEY (app, client_id, packet_id)
    );"#,
    // What SQLite's webhook format migration adds: an endpoint's format.
    "ALTER TABLE hook_endpoints ADD COLUMN format TEXT NOT NULL DEFAULT 'standard';",
    // What SQLite's MQTT wills migration adds: a persistent session's will and its delay.
    r#"CREATE TABLE mqtt_session_wills (
        app TEXT COLLATE "C" NOT NULL,
        client_id TEXT COLLATE "C" NOT NULL,
        will BYTEA NOT NULL,
        delay_ms BIGINT NOT NULL,
        PRIMARY KEY (app, client_id)
    );"#,
    // What SQLite's MQTT sessions across a cluster migration adds: the node holding a
    // session's connection, the QoS of an in-flight packet id.
    r#"ALTER TABLE mqtt_sessions ADD COLUMN node TEXT COLLATE "C";
    CREATE INDEX mqtt_sessions_node ON mqtt_sessions (node) WHERE node IS NOT NULL;
    ALTER TABLE mqtt_session_inflight ADD COLUMN qos BIGINT NOT NULL DEFAULT 2;"#,
    // What SQLite's retained messages migration adds: each channel's retained message (MQTT's
    // RETAIN), or the clear that ended it, apart from its history.
    r#"CREATE TABLE retained (
        channel TEXT COLLATE "C" PRIMARY KEY,
        epoch TEXT NOT NULL,
        seq BIGINT NOT NULL,
        client_id TEXT,
        time BIGINT NOT NULL,
        data BYTEA NOT NULL,
        expires_at_ms BIGINT,
        cleared BOOLEAN NOT NULL
    );"#,
    // What SQLite's MQTT inbound QoS 2 migration adds: a persistent session's inbound QoS 2
    // packet ids awaiting PUBREL, with their messages' key numbers.
    r#"CREATE TABLE mqtt_session_inbound_qos2 (
        app TEXT COLLATE "C" NOT NULL,
        client_id TEXT COLLATE "C" NOT NULL,
        packet_id BIGINT NOT NULL,
        n BIGINT NOT NULL,
        PRIMARY KEY (app, client_id, packet_id)
    );"#,
    // What SQLite's MQTT in-flight RETAIN migration adds: whether an in-flight message went
    // with RETAIN set (NULL for the rows written before).
    "ALTER TABLE mqtt_session_inflight ADD COLUMN retain BIGINT;",
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Brings the schema up to [`SCHEMA_VERSION`] in one transaction under the migration lock, and
/// answers the version found before. Refuses a database whose schema is newer than this build.
pub(crate) async fn migrate(client: &mut Client) -> Result<i64, StoreError> {
    let tx = client.transaction().await.map_err(pg_error)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(pg_error)?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS herald_schema (version BIGINT NOT NULL)")
        .await
        .map_err(pg_error)?;
    let found: Option<i64> = tx
        .query_opt("SELECT max(version) FROM herald_schema", &[])
        .await
        .map_err(pg_error)?
        .and_then(|row| row.get(0));
    let current = found.unwrap_or(0);
    if current > SCHEMA_VERSION {
        return Err(StoreError::failed(format!(
            "database schema version {current} is newer than this Herald supports \
             ({SCHEMA_VERSION}); upgrade Herald"
        )));
    }
    let start = usize::try_from(current)
        .map_err(|_| StoreError::failed(format!("invalid schema version {current}")))?;
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(start) {
        let version = index as i64 + 1;
        tx.batch_execute(sql)
            .await
            .map_err(|e| StoreError::backend(format!("migration to version {version}"), e))?;
        tracing::info!(version, "postgres schema migrated");
    }
    if current < SCHEMA_VERSION {
        tx.execute("DELETE FROM herald_schema", &[])
            .await
            .map_err(pg_error)?;
        tx.execute(
            "INSERT INTO herald_schema (version) VALUES ($1)",
            &[&SCHEMA_VERSION],
        )
        .await
        .map_err(pg_error)?;
    }
    tx.commit().await.map_err(pg_error)?;
    Ok(current)
}
