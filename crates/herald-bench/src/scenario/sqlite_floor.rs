//! The raw floor of a provider broadcast's bookkeeping, measured in the same run: N rows shaped
//! like provider jobs (app, push, device, token, state) inserted into a fresh SQLite table in one
//! transaction, read back with one query, and updated once each (a settle) in one more
//! transaction, with the server's store settings (WAL, `synchronous=FULL`). No HTTP, no TLS,
//! no leases: what the same number of rows costs SQLite alone on this disk.

use std::path::Path;
use std::time::Instant;

use rusqlite::{params, Connection};

use crate::scenario::devices::apns_token;

/// What the floor measured.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct SqliteFloor {
    /// Rows.
    pub rows: u64,
    /// Seconds to insert them in one transaction (including its commit).
    pub insert_s: f64,
    /// Seconds to read them all back.
    pub read_s: f64,
    /// Seconds to update each once, in one transaction.
    pub update_s: f64,
}

impl SqliteFloor {
    /// Insert plus read back: the floor the broadcast's total time is divided by.
    pub fn insert_and_read_s(&self) -> f64 {
        self.insert_s + self.read_s
    }
}

/// Measures the floor with `rows` rows in a new database in `dir` (removed afterwards).
pub fn measure(dir: &Path, rows: u64) -> rusqlite::Result<SqliteFloor> {
    let path = dir.join(format!("sqlite-floor-{}.db", std::process::id()));
    let result = measure_at(&path, rows);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    result
}

fn measure_at(path: &Path, rows: u64) -> rusqlite::Result<SqliteFloor> {
    let mut conn = Connection::open(path)?;
    conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.execute_batch(
        "CREATE TABLE jobs (id INTEGER PRIMARY KEY, app TEXT NOT NULL, push TEXT NOT NULL,
         device TEXT NOT NULL, token TEXT NOT NULL, state TEXT NOT NULL)",
    )?;
    let start = Instant::now();
    let tx = conn.transaction()?;
    {
        let mut insert = tx.prepare(
            "INSERT INTO jobs (app, push, device, token, state) VALUES ('default', ?1, ?2, ?3, 'queued')",
        )?;
        for i in 0..rows {
            insert.execute(params![
                "p-floor",
                format!("bench-floor-{i}"),
                apns_token(i)
            ])?;
        }
    }
    tx.commit()?;
    let insert_s = start.elapsed().as_secs_f64();

    let start = Instant::now();
    let mut bytes = 0usize;
    {
        let mut read = conn.prepare("SELECT id, device, token FROM jobs WHERE state = 'queued'")?;
        let mut found = read.query([])?;
        while let Some(row) = found.next()? {
            bytes += row.get_ref(1)?.as_str()?.len() + row.get_ref(2)?.as_str()?.len();
        }
    }
    let read_s = start.elapsed().as_secs_f64();
    debug_assert!(bytes > 0 || rows == 0);

    let start = Instant::now();
    let tx = conn.transaction()?;
    {
        let mut settle = tx.prepare("UPDATE jobs SET state = 'done' WHERE id = ?1")?;
        for id in 1..=rows as i64 {
            settle.execute([id])?;
        }
    }
    tx.commit()?;
    let update_s = start.elapsed().as_secs_f64();
    Ok(SqliteFloor {
        rows,
        insert_s,
        read_s,
        update_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_a_small_table_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let floor = measure(dir.path(), 100).unwrap();
        assert_eq!(floor.rows, 100);
        assert!(floor.insert_and_read_s() >= floor.insert_s);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
