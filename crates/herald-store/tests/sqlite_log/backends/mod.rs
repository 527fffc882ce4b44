//! The backend conformance suite: the same behaviour tests, run once against SQLite and once
//! against PostgreSQL, so the two stores cannot drift. Each test body takes a [`Backend`] and
//! uses only the store traits (`ChannelLog`, `Tenancy`, `AuditLog`, `DeviceRegistry`,
//! `CredentialStore`, `JobQueue`: together [`Store`]); [`on_both!`] makes one `#[tokio::test]`
//! per backend (`backends::<body>::sqlite` and `::postgres`). Every PostgreSQL test starts its
//! own server (`herald_testkit::Postgres`, installed by `scripts/install-services.sh`, which
//! `scripts/test.sh` runs first) with its own database, so tests run in parallel threads without
//! sharing anything.
//!
//! Bodies: the channel log in [`log`], its retained messages in [`retained`], apps, keys, usage and revocations in [`tenancy`], what a
//! deleted app leaves purged in [`app_purge`], the
//! registries in [`registry`], devices in [`devices`], credentials in [`credentials`], the audit
//! log in [`audit`], the job queue in [`jobs`] (a broadcast's directly sent pages in
//! [`job_pages`]; more in `crate::jobs`), webhook endpoints and their queues in [`hooks`] and
//! [`hooks_queue`] (through [`Backend::hooks`]), Pusher credentials in [`pusher`] (through
//! [`Backend::pusher`]), MQTT persistent sessions in [`mqtt_sessions`] (through
//! [`Backend::mqtt_sessions`]); PostgreSQL's own behaviour (two nodes on one
//! database, the server killed mid-traffic, schema versions, TLS) in [`cluster`],
//! [`job_counts_migration`] and [`tls`].

mod app_purge;
mod audit;
mod cluster;
mod credentials;
mod devices;
mod hooks;
mod hooks_queue;
mod job_counts_migration;
mod job_pages;
mod jobs;
mod log;
mod mqtt_sessions;
mod pusher;
mod registry;
mod retained;
mod tenancy;
mod tls;

use std::sync::Arc;

use herald_core::audit::AuditLog;
use herald_core::log::ChannelLog;
use herald_core::tenancy::Tenancy;
use herald_hooks::HookStore;
use herald_mqtt::session::store::MqttSessionStore;
use herald_push::credentials::CredentialStore;
use herald_push::jobs::JobQueue;
use herald_push::registry::DeviceRegistry;
use herald_pusher::PusherCredentialStore;
use herald_store::{PostgresOptions, PostgresStore, SqliteLog, SqliteOptions};
use herald_testkit::Postgres;

use super::RecordingSink;

/// Everything a store implements, as one trait object.
pub trait Store:
    ChannelLog + Tenancy + AuditLog + DeviceRegistry + CredentialStore + JobQueue
{
}

impl<T: ChannelLog + Tenancy + AuditLog + DeviceRegistry + CredentialStore + JobQueue> Store for T {}

/// Where a backend keeps its data, kept alive for the test.
enum Place {
    Sqlite(tempfile::TempDir),
    Postgres { _server: Postgres, url: String },
}

/// The open store.
enum Open {
    Sqlite(Arc<SqliteLog>),
    Postgres(Arc<PostgresStore>),
}

/// A store under test, its sink, and where its data lives.
pub struct Backend {
    open: Open,
    place: Place,
    /// What the store's commit sink saw.
    pub sink: Arc<RecordingSink>,
}

impl Backend {
    /// A new SQLite store in a temporary directory.
    pub async fn sqlite() -> Backend {
        let dir = tempfile::tempdir().unwrap();
        Backend::open(Place::Sqlite(dir)).await
    }

    /// A new PostgreSQL store in a database of its own on a server of its own.
    pub async fn postgres() -> Backend {
        let server = tokio::task::spawn_blocking(Postgres::start)
            .await
            .unwrap()
            .expect("start PostgreSQL (scripts/install-services.sh installs it)");
        let url = server.create_database("herald").unwrap();
        Backend::open(Place::Postgres {
            _server: server,
            url,
        })
        .await
    }

    async fn open(place: Place) -> Backend {
        let sink = Arc::new(RecordingSink::default());
        let open = match &place {
            Place::Sqlite(dir) => Open::Sqlite(
                SqliteLog::open(dir.path(), SqliteOptions::default(), sink.clone()).unwrap(),
            ),
            Place::Postgres { url, .. } => Open::Postgres(
                PostgresStore::open(url, PostgresOptions::default(), sink.clone())
                    .await
                    .unwrap(),
            ),
        };
        Backend { open, place, sink }
    }

    /// The store.
    pub fn store(&self) -> &dyn Store {
        match &self.open {
            Open::Sqlite(log) => &**log,
            Open::Postgres(store) => &**store,
        }
    }

    /// The store's webhooks ([`HookStore`], not part of [`Store`]: it names its methods as
    /// `JobQueue` does).
    pub fn hooks(&self) -> &dyn HookStore {
        match &self.open {
            Open::Sqlite(log) => &**log,
            Open::Postgres(store) => &**store,
        }
    }

    /// The store's Pusher credentials ([`PusherCredentialStore`], not part of [`Store`], as
    /// [`HookStore`] is not).
    pub fn pusher(&self) -> &dyn PusherCredentialStore {
        match &self.open {
            Open::Sqlite(log) => &**log,
            Open::Postgres(store) => &**store,
        }
    }

    /// The store's MQTT persistent sessions ([`MqttSessionStore`], not part of [`Store`]).
    pub fn mqtt_sessions(&self) -> &dyn MqttSessionStore {
        match &self.open {
            Open::Sqlite(log) => &**log,
            Open::Postgres(store) => &**store,
        }
    }

    /// The store, shared (for tasks of their own).
    pub fn shared(&self) -> Arc<dyn Store> {
        match &self.open {
            Open::Sqlite(log) => log.clone(),
            Open::Postgres(store) => store.clone(),
        }
    }

    /// Closes the store and opens it again on the same data, with a new sink.
    pub async fn reopen(self) -> Backend {
        self.store().close().await;
        let Backend { open, place, .. } = self;
        drop(open);
        Backend::open(place).await
    }

    /// The SQLite store's data directory (`None` on PostgreSQL).
    pub fn sqlite_dir(&self) -> Option<&std::path::Path> {
        match &self.place {
            Place::Sqlite(dir) => Some(dir.path()),
            Place::Postgres { .. } => None,
        }
    }

    /// The PostgreSQL store's database URL (`None` on SQLite).
    pub fn postgres_url(&self) -> Option<&str> {
        match &self.place {
            Place::Sqlite(_) => None,
            Place::Postgres { url, .. } => Some(url),
        }
    }

    /// Runs one step of the deleted apps' purge: the rows it deleted or changed.
    pub async fn purge_deleted_apps(&self) -> usize {
        match &self.open {
            Open::Sqlite(log) => log.purge_deleted_apps().await.unwrap(),
            Open::Postgres(store) => store.purge_deleted_apps().await.unwrap(),
        }
    }

    /// Sweeps expired messages as if the time were `now_ms`.
    pub async fn trim_expired_at(&self, now_ms: i64) -> usize {
        match &self.open {
            Open::Sqlite(log) => log.trim_expired_at(now_ms).await.unwrap(),
            Open::Postgres(store) => store.trim_expired_at(now_ms).await.unwrap(),
        }
    }
}

/// Makes `mod $body { sqlite, postgres }`: one test per backend, each bounded in time.
#[macro_export]
macro_rules! on_both {
    ($($body:ident),* $(,)?) => {$(
        mod $body {
            use std::time::Duration;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let backend = super::super::Backend::sqlite().await;
                tokio::time::timeout(Duration::from_secs(120), super::$body(backend))
                    .await
                    .expect("test timed out");
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let backend = super::super::Backend::postgres().await;
                tokio::time::timeout(Duration::from_secs(120), super::$body(backend))
                    .await
                    .expect("test timed out");
            }
        }
    )*};
}
