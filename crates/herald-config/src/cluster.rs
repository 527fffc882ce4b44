//! The cluster keys: `store` (`sqlite`, the default, or a `postgres://` URL every node shares),
//! `bus` (`local`, the default, or one or more `redis://` / `rediss://` URLs), `redis_cluster`
//! (the bus URLs are nodes of a Redis Cluster), `redis_ca_file` (extra CA certificates trusted
//! for `rediss://` URLs, read and checked at load), `redis_receive_queue` (the bus's receive
//! queue, in messages) and `postgres_pool` (connections per node).
//! A Redis bus over a per-node SQLite store is refused: nodes would each have their own logs.

use std::path::{Path, PathBuf};

use super::layers::{Layers, Raw};
use super::validate::{boolean, text, ConfigError};
use super::ClusterConfig;

/// `redis_receive_queue` when unset: see docs/config.md for why this size.
pub const DEFAULT_REDIS_RECEIVE_QUEUE: usize = 8192;

/// `sqlite` (none) or a PostgreSQL URL.
fn store(raw: &Raw) -> Result<Option<String>, String> {
    let t = text(raw)?.trim();
    if t == "sqlite" {
        return Ok(None);
    }
    if t.starts_with("postgres://") || t.starts_with("postgresql://") {
        return Ok(Some(t.to_owned()));
    }
    Err("expected \"sqlite\" or a postgres:// URL such as postgres://herald:PASSWORD@db:5432/herald".into())
}

/// `local` (none) or Redis URLs, separated by commas (a TOML array also works).
fn bus(raw: &Raw) -> Result<Vec<String>, String> {
    let items: Vec<String> = match raw {
        Raw::Toml(toml::Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned).ok_or("expected strings"))
            .collect::<Result<_, _>>()?,
        other => text(other)?
            .split(',')
            .map(|s| s.trim().to_owned())
            .collect(),
    };
    if items.len() == 1 && items[0] == "local" {
        return Ok(Vec::new());
    }
    for url in &items {
        if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
            return Err(format!(
                "expected \"local\" or redis:// URLs (rediss:// for TLS), separated by commas; got {url:?}"
            ));
        }
    }
    Ok(items)
}

/// A PEM file's path (not empty).
fn ca_path(raw: &Raw) -> Result<Option<PathBuf>, String> {
    let t = text(raw)?.trim();
    if t.is_empty() {
        return Err("must not be empty".into());
    }
    Ok(Some(PathBuf::from(t)))
}

/// The PEM certificates in `path`, read now so a bad file is reported at load.
fn ca_pem(path: &Path) -> Result<Option<Vec<u8>>, String> {
    let pem = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
        return Err(format!("{} holds no PEM certificate", path.display()));
    }
    Ok(Some(pem))
}

/// Slots of the Redis bus's receive queue: 1,024 to 1,048,576.
fn receive_queue(raw: &Raw) -> Result<usize, String> {
    let n: usize = match raw {
        Raw::Toml(toml::Value::Integer(n)) => {
            usize::try_from(*n).map_err(|_| "must be 1024 to 1048576")?
        }
        other => text(other)?
            .trim()
            .parse()
            .map_err(|_| "expected a whole number")?,
    };
    if (1024..=1 << 20).contains(&n) {
        Ok(n)
    } else {
        Err("must be 1024 to 1048576".into())
    }
}

fn pool(raw: &Raw) -> Result<usize, String> {
    let n: usize = match raw {
        Raw::Toml(toml::Value::Integer(n)) => {
            usize::try_from(*n).map_err(|_| "must be 2 to 256")?
        }
        other => text(other)?
            .trim()
            .parse()
            .map_err(|_| "expected a whole number")?,
    };
    if (2..=256).contains(&n) {
        Ok(n)
    } else {
        Err("must be 2 to 256".into())
    }
}

impl Layers {
    /// The cluster settings.
    pub(super) fn cluster(&self) -> Result<ClusterConfig, ConfigError> {
        let postgres = self.get("store", None, store)?;
        let redis = self.get("bus", Vec::new(), bus)?;
        if postgres.is_none() && !redis.is_empty() {
            // Named after the key that makes it wrong, with where it came from.
            let reason = "a Redis bus needs a shared store: set store to a postgres:// URL too \
                          (with SQLite every node has its own log)";
            return Err(self
                .get("bus", (), |_| Err::<(), _>(reason.into()))
                .expect_err("bus is set"));
        }
        let redis_ca_file = self.get("redis_ca_file", None, ca_path)?;
        let redis_ca_pem = match &redis_ca_file {
            None => None,
            Some(path) => self.get("redis_ca_file", None, |_| ca_pem(path))?,
        };
        Ok(ClusterConfig {
            postgres,
            redis,
            redis_cluster: self.get("redis_cluster", false, boolean)?,
            redis_ca_file,
            redis_ca_pem,
            postgres_pool: self.get("postgres_pool", 16, pool)?,
            redis_receive_queue: self.get(
                "redis_receive_queue",
                DEFAULT_REDIS_RECEIVE_QUEUE,
                receive_queue,
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{err, load};
    use super::super::ConfigFlags;

    #[test]
    fn one_node_by_default_and_urls_checked() {
        let c = load(None, &[], ConfigFlags::default()).unwrap();
        assert_eq!(c.cluster.postgres, None);
        assert!(c.cluster.redis.is_empty());
        let c = load(
            None,
            &[
                ("HERALD_STORE", "postgres://herald:pw@db:5432/herald"),
                ("HERALD_BUS", "redis://a:6379, redis://b:6379"),
                ("HERALD_REDIS_CLUSTER", "true"),
            ],
            ConfigFlags::default(),
        )
        .unwrap();
        assert_eq!(
            c.cluster.postgres.as_deref(),
            Some("postgres://herald:pw@db:5432/herald")
        );
        assert_eq!(c.cluster.redis, ["redis://a:6379", "redis://b:6379"]);
        assert!(c.cluster.redis_cluster);
        let e = err(
            None,
            &[("HERALD_STORE", "mysql://x")],
            ConfigFlags::default(),
        );
        assert!(
            e.contains("HERALD_STORE") && e.contains("postgres://"),
            "{e}"
        );
        let e = err(
            None,
            &[("HERALD_BUS", "redis://a:6379")],
            ConfigFlags::default(),
        );
        assert!(
            e.contains("HERALD_BUS") && e.contains("shared store"),
            "{e}"
        );
        let e = err(
            None,
            &[
                ("HERALD_STORE", "postgres://db/h"),
                ("HERALD_BUS", "nats://x"),
            ],
            ConfigFlags::default(),
        );
        assert!(e.contains("redis://"), "{e}");
        let flags = ConfigFlags {
            store: Some("sqlite".into()),
            bus: Some("local".into()),
            ..ConfigFlags::default()
        };
        let c = load(None, &[("HERALD_STORE", "postgres://db/h")], flags).unwrap();
        assert_eq!(
            c.cluster.postgres, None,
            "the flag wins over the environment"
        );
    }

    #[test]
    fn the_redis_receive_queue_is_bounded() {
        let c = load(None, &[], ConfigFlags::default()).unwrap();
        assert_eq!(
            c.cluster.redis_receive_queue,
            super::DEFAULT_REDIS_RECEIVE_QUEUE
        );
        let c = load(
            None,
            &[("HERALD_REDIS_RECEIVE_QUEUE", "65536")],
            ConfigFlags::default(),
        )
        .unwrap();
        assert_eq!(c.cluster.redis_receive_queue, 65536);
        for bad in ["10", "2000000", "many"] {
            let e = err(
                None,
                &[("HERALD_REDIS_RECEIVE_QUEUE", bad)],
                ConfigFlags::default(),
            );
            assert!(e.contains("HERALD_REDIS_RECEIVE_QUEUE"), "{e}");
        }
    }

    #[test]
    fn the_redis_ca_file_is_read_at_load_and_a_bad_one_named() {
        let c = load(None, &[], ConfigFlags::default()).unwrap();
        assert_eq!(c.cluster.redis_ca_file, None);
        assert_eq!(c.cluster.redis_ca_pem, None);
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("ca.pem");
        let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        std::fs::write(&good, pem).unwrap();
        let cluster = [
            ("HERALD_STORE", "postgres://db/h"),
            ("HERALD_BUS", "rediss://redis:6380"),
        ];
        let mut env = cluster.to_vec();
        let good_path = good.display().to_string();
        env.push(("HERALD_REDIS_CA_FILE", &good_path));
        let c = load(None, &env, ConfigFlags::default()).unwrap();
        assert_eq!(c.cluster.redis, ["rediss://redis:6380"]);
        assert_eq!(c.cluster.redis_ca_file.as_deref(), Some(good.as_path()));
        assert_eq!(c.cluster.redis_ca_pem.as_deref(), Some(pem.as_bytes()));

        let mut env = cluster.to_vec();
        env.push(("HERALD_REDIS_CA_FILE", "/nonexistent/redis-ca.pem"));
        let e = err(None, &env, ConfigFlags::default());
        assert!(
            e.contains("HERALD_REDIS_CA_FILE")
                && e.contains("cannot read /nonexistent/redis-ca.pem"),
            "{e}"
        );
        let not_pem = dir.path().join("key.txt");
        std::fs::write(&not_pem, "hello").unwrap();
        let not_pem_path = not_pem.display().to_string();
        let e = err(
            Some(&format!("redis_ca_file = {not_pem_path:?}")),
            &cluster,
            ConfigFlags::default(),
        );
        assert!(
            e.contains("redis_ca_file") && e.contains("holds no PEM certificate"),
            "{e}"
        );
    }
}
