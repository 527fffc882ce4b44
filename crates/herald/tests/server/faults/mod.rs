//! Faults the operating system really produces, against the real binary and without root: a
//! full disk (a file-size limit, `RLIMIT_FSIZE`, set with `prlimit`), a failing fsync (an
//! `LD_PRELOAD` shim built here with `cc`), and `kill -9` at random moments under load. What
//! Herald promises for each is docs/security.md's section "12. Faults".

mod disk_full;
mod fsync;
mod kill_loop;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::support::Server;

/// Every message of `channel`, as seq -> (message id, data).
async fn history(server: &Server, channel: &str) -> BTreeMap<u64, (String, Value)> {
    let mut all = BTreeMap::new();
    let mut since = 0;
    loop {
        let (status, page) = server
            .get(&format!(
                "/v1/channels/{channel}/messages?since={since}&limit=1000"
            ))
            .await;
        assert_eq!(status, 200, "history of {channel}: {page}");
        let messages = page["messages"].as_array().unwrap();
        let Some(last) = messages.last() else {
            return all;
        };
        since = last["seq"].as_u64().unwrap();
        for m in messages {
            let id = m["id"].as_str().unwrap_or_default().to_string();
            all.insert(m["seq"].as_u64().unwrap(), (id, m["data"].clone()));
        }
    }
}

/// `PRAGMA integrity_check` of the data directory's database (the server stopped).
fn integrity_check(data: &Path) -> String {
    let conn = rusqlite::Connection::open(data.join("herald.db")).unwrap();
    conn.query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap()
}
