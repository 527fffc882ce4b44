//! What the cluster tests' nodes share: a testkit PostgreSQL with a `herald` database and a
//! testkit Redis, started for one test, and the flags that put a `herald serve` node over them
//! ([`Builder::in_cluster`]: `--store`, `--bus` and one credentials key).

use herald_testkit::{Postgres, Redis};

use super::Builder;

/// The credentials key every node is started with (64 hex digits).
pub const CREDENTIALS_KEY: &str =
    "8899aabbccddeeff00112233445566778899aabbccddeeff0011223344556677";

/// A PostgreSQL and a Redis for one test. Dropping it stops both (which waits for their
/// processes: off the runtime, [`StoreAndBus::stop`]).
pub struct StoreAndBus {
    pub postgres: Postgres,
    pub redis: Redis,
    /// The `herald` database's URL: every node's `--store`.
    pub store: String,
    /// Redis's URL: every node's `--bus`.
    pub bus: String,
}

impl StoreAndBus {
    /// Starts PostgreSQL and Redis (off the runtime: each waits until its server answers) and
    /// creates the `herald` database.
    pub async fn start() -> StoreAndBus {
        let (postgres, redis) = tokio::task::spawn_blocking(|| {
            let postgres = Postgres::start().expect("PostgreSQL starts");
            let redis = Redis::start().expect("Redis starts");
            (postgres, redis)
        })
        .await
        .unwrap();
        let store = postgres.create_database("herald").expect("a database");
        let bus = redis.url();
        StoreAndBus {
            postgres,
            redis,
            store,
            bus,
        }
    }

    /// Stops Redis and PostgreSQL off the runtime.
    pub async fn stop(self) {
        tokio::task::spawn_blocking(move || drop(self))
            .await
            .unwrap();
    }
}

impl Builder {
    /// A node of the cluster over `shared`: `--store`, `--bus` and `--credentials-key`
    /// ([`CREDENTIALS_KEY`]) after the arguments given so far.
    pub fn in_cluster(self, shared: &StoreAndBus) -> Self {
        let bus = shared.bus.clone();
        self.in_cluster_over(shared, &bus)
    }

    /// As [`Builder::in_cluster`], reaching Redis at `bus` (a [`super::proxy::Proxy`] to it,
    /// for a test that cuts this node off).
    pub fn in_cluster_over(self, shared: &StoreAndBus, bus: &str) -> Self {
        self.arg("--store")
            .arg(&shared.store)
            .arg("--bus")
            .arg(bus)
            .arg("--credentials-key")
            .arg(CREDENTIALS_KEY)
    }
}
