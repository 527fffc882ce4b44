//! `kill -9` at random moments under load, 60 times (`HERALD_KILL_LOOP_KILLS` sets another
//! count): publishers, device registrations, and pushes to a device with inbox acks run against
//! the real binary, which is killed and restarted on the same data directory and port while they
//! run. Every write the server acknowledged must be there afterwards: each channel's messages with
//! exactly the seqs they were acknowledged with, contiguous from 1, none twice; every registered
//! device; the device's acknowledged inbox position.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use record::Record;
use serde_json::{json, Value};
use tokio::sync::watch;

use super::history;
use crate::support::{self, Server};

/// Publishing tasks, each on a channel of its own.
const PUBLISHERS: usize = 3;

/// How many kills, unless `HERALD_KILL_LOOP_KILLS` says otherwise.
fn kills() -> usize {
    std::env::var("HERALD_KILL_LOOP_KILLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(60)
}

/// Acknowledged writes, as the clients saw them.
mod record {
    use std::sync::Mutex;

    /// What the server acknowledged.
    #[derive(Default)]
    pub struct Record {
        inner: Mutex<Acked>,
    }

    #[derive(Default, Clone)]
    pub struct Acked {
        /// Per publisher: (seq, message id) of each acknowledged publish, in order.
        pub publishes: Vec<Vec<(u64, String)>>,
        /// Ids of acknowledged device registrations.
        pub devices: Vec<String>,
        /// Pushes to the inbox device acknowledged (`202`), in order.
        pub pushes: u64,
        /// The highest `$device` position an ack was answered with.
        pub acked: u64,
    }

    impl Record {
        pub fn update(&self, change: impl FnOnce(&mut Acked)) {
            change(&mut self.inner.lock().unwrap());
        }

        pub fn snapshot(&self) -> Acked {
            self.inner.lock().unwrap().clone()
        }
    }
}

/// Sends one request to whichever server process is up at `base`; `None` on any transport
/// failure (refused while it restarts, reset by the kill).
async fn send(
    http: &reqwest::Client,
    base: &str,
    path: &str,
    key: &str,
    body: &Value,
) -> Option<(u16, Value)> {
    let answer = http
        .post(format!("{base}{path}"))
        .bearer_auth(key)
        .json(body)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .ok()?;
    let status = answer.status().as_u16();
    let body = answer.json().await.ok()?;
    Some((status, body))
}

/// Sends until the server answers `expected` (retrying the same request, with the same
/// idempotency key, across kills); `None` once `stop` is set.
async fn until_answered(
    http: &reqwest::Client,
    base: &str,
    path: &str,
    key: &str,
    body: &Value,
    expected: &[u16],
    stop: &AtomicBool,
) -> Option<Value> {
    while !stop.load(Ordering::Relaxed) {
        match send(http, base, path, key, body).await {
            Some((status, answer)) if expected.contains(&status) => return Some(answer),
            Some((status, answer)) if status < 500 => {
                panic!("{path}: {status} {answer} (body {body})")
            }
            _ => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
    None
}

/// The load: each task loops until `stop`, counting every acknowledged write on `progress`.
fn start_load(
    base: String,
    device_token: String,
    record: Arc<Record>,
    progress: watch::Sender<u64>,
    stop: Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let http = reqwest::Client::new();
    let progress = Arc::new(progress);
    let tick = move |progress: &watch::Sender<u64>| progress.send_modify(|n| *n += 1);
    let mut tasks = Vec::new();
    for p in 0..PUBLISHERS {
        let (http, base, record, progress, stop) = (
            http.clone(),
            base.clone(),
            record.clone(),
            progress.clone(),
            stop.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let path = format!("/v1/channels/kill{p}/messages");
            for i in 0.. {
                let id = format!("p{p}-{i}");
                let body = json!({ "id": id, "data": { "p": p, "i": i } });
                let key = support::API_KEY;
                let Some(answer) =
                    until_answered(&http, &base, &path, key, &body, &[200], &stop).await
                else {
                    return;
                };
                let seq = answer["seq"].as_u64().expect("a seq");
                record.update(|a| a.publishes[p].push((seq, id)));
                tick(&progress);
            }
        }));
    }
    {
        let (http, base, record, progress, stop) = (
            http.clone(),
            base.clone(),
            record.clone(),
            progress.clone(),
            stop.clone(),
        );
        tasks.push(tokio::spawn(async move {
            for k in 0.. {
                let id = format!("d-{k}");
                let body = json!({ "platform": "herald", "id": id, "tags": ["kill"] });
                let key = support::API_KEY;
                let answered =
                    until_answered(&http, &base, "/v1/devices", key, &body, &[200, 201], &stop)
                        .await;
                if answered.is_none() {
                    return;
                }
                record.update(|a| a.devices.push(id));
                tick(&progress);
            }
        }));
    }
    tasks.push(tokio::spawn(async move {
        for j in 1u64.. {
            let push = json!({ "id": format!("push-{j}"), "target": { "device": "inbox" }, "data": { "j": j } });
            let key = support::API_KEY;
            if until_answered(&http, &base, "/v1/push", key, &push, &[202], &stop)
                .await
                .is_none()
            {
                return;
            }
            record.update(|a| a.pushes = j);
            let ack = json!({ "channel": "$device", "seq": j });
            let Some(answer) =
                until_answered(&http, &base, "/v1/ack", &device_token, &ack, &[200], &stop).await
            else {
                return;
            };
            let acked = answer["device"]["seq"].as_u64().expect("the acked seq");
            assert!(acked >= j, "ack of {j} answered {answer}");
            record.update(|a| a.acked = a.acked.max(acked));
            tick(&progress);
        }
    }));
    tasks
}

#[tokio::test]
async fn kill9_at_random_moments_under_load_loses_nothing_acknowledged() {
    let kills = kills();
    let limit = Duration::from_secs(30 + 3 * kills as u64);
    tokio::time::timeout(limit, async {
        let mut server = Server::builder()
            .config("[history]\nsize = 1000000\n")
            .start()
            .await;
        let (status, _) = server
            .post(
                "/v1/devices",
                json!({ "platform": "herald", "id": "inbox" }),
            )
            .await;
        assert_eq!(status, 201);
        let (status, minted) = server
            .post(
                "/v1/tokens",
                json!({ "sub": "inbox", "device": "inbox", "ttl": 3600 }),
            )
            .await;
        assert_eq!(status, 200, "{minted}");
        let device_token = minted["token"].as_str().unwrap().to_string();

        let record = Arc::new(Record::default());
        record.update(|a| a.publishes = vec![Vec::new(); PUBLISHERS]);
        let stop = Arc::new(AtomicBool::new(false));
        let (progress_tx, mut progress) = watch::channel(0u64);
        let tasks = start_load(
            server.url(""),
            device_token,
            record.clone(),
            progress_tx,
            stop.clone(),
        );
        for _ in 0..kills {
            // Wait until this server process has acknowledged a few writes, then kill it at
            // a random moment a little later.
            let target = *progress.borrow() + 8;
            progress.wait_for(|n| *n >= target).await.unwrap();
            let delay = rand::thread_rng().gen_range(0..80);
            tokio::time::sleep(Duration::from_millis(delay)).await;
            server.restart_same_port().await;
        }
        let target = *progress.borrow() + 4;
        progress.wait_for(|n| *n >= target).await.unwrap();
        stop.store(true, Ordering::Relaxed);
        for task in tasks {
            task.await.expect("a load task panicked");
        }
        let acked = record.snapshot();

        for (p, publishes) in acked.publishes.iter().enumerate() {
            let stored = history(&server, &format!("kill{p}")).await;
            let seqs: Vec<u64> = stored.keys().copied().collect();
            let contiguous: Vec<u64> = (1..=seqs.len() as u64).collect();
            assert_eq!(seqs, contiguous, "kill{p}: seqs contiguous from 1, no gap");
            let mut ids: Vec<&String> = stored.values().map(|(id, _)| id).collect();
            ids.sort();
            ids.dedup();
            assert_eq!(ids.len(), stored.len(), "kill{p}: no message stored twice");
            for (seq, id) in publishes {
                assert_eq!(
                    stored.get(seq).map(|(stored_id, _)| stored_id),
                    Some(id),
                    "kill{p}: acknowledged {id} at seq {seq}"
                );
            }
            // At most the one publish in flight at the end was stored without an answer.
            assert!(
                stored.len() <= publishes.len() + 1,
                "kill{p}: nothing invented"
            );
        }
        for id in &acked.devices {
            let (status, device) = server.get(&format!("/v1/devices/{id}")).await;
            assert_eq!(status, 200, "acknowledged device {id}: {device}");
        }
        let (status, inbox) = server.get("/v1/devices/inbox/inbox").await;
        assert_eq!(status, 200, "{inbox}");
        let stored_acked = inbox["device_log"]["acked"]["seq"].as_u64().unwrap();
        let head = inbox["device_log"]["head"]["seq"].as_u64().unwrap();
        assert!(
            stored_acked >= acked.acked,
            "acknowledged ack of {} kept (stored {stored_acked})",
            acked.acked
        );
        assert!(
            head == acked.pushes || head == acked.pushes + 1,
            "{} pushes acknowledged, {head} stored",
            acked.pushes
        );
        assert!(acked.acked > 0 && !acked.devices.is_empty(), "the load ran");
        eprintln!(
            "kill loop: {kills} kills; {} publishes, {} devices, {} pushes, ack at {} acknowledged",
            acked.publishes.iter().map(Vec::len).sum::<usize>(),
            acked.devices.len(),
            acked.pushes,
            acked.acked
        );
    })
    .await
    .expect("the kill loop finished in time");
}
