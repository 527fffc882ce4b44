//! The counters per push against the grouping of every job row they replace: random sequences
//! of queue operations (enqueue, lease with lapsing leases, settle, settle live, expansion
//! pages with direct sends, in-flight marks, replay, drop, prune), and after each one the
//! receipt's figures from the counters equal the old query over the rows plus the direct
//! sends that left no row. On both backends, each with the grouping query in its own SQL.

use std::collections::BTreeMap;

use herald_push::jobs::{ExpandedPage, PageJob};
use rusqlite::{params, Connection};

use super::*;

crate::on_both!(counters_agree_with_grouping_every_job_row_over_random_operations);

/// A small deterministic generator (xorshift64*), so a failing seed can be replayed.
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

const PUSHES: [&str; 2] = ["short", "long"];
const RESULTS: [&str; 5] = [
    "accepted",
    "live",
    "rejected:BadDeviceToken",
    "unregistered:Unregistered",
    "expired",
];

/// The grouping query receipts used before the counters, over the rows, in one connection of
/// the backend's own (SQLite: the database file; PostgreSQL: the same query in its SQL).
enum Rows {
    Sqlite(Connection),
    Postgres(tokio_postgres::Client),
}

/// The grouping query: kind, state, result when done, doubt, and how many jobs.
const GROUPING: &str = "SELECT kind, state, CASE WHEN state = 'done' THEN result END, in_doubt,
         count(*) FROM jobs WHERE app = 'shop' AND push = $1
     GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4";

impl Rows {
    async fn open(b: &Backend) -> Rows {
        if let Some(dir) = b.sqlite_dir() {
            return Rows::Sqlite(Connection::open(dir.join(herald_store::DB_FILE_NAME)).unwrap());
        }
        let url = b.postgres_url().expect("a SQLite or PostgreSQL backend");
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        Rows::Postgres(client)
    }

    /// Each group's kind, state, result, doubt and size.
    async fn groups(&self, push: &str) -> Vec<(String, String, Option<String>, bool, u64)> {
        match self {
            Rows::Sqlite(conn) => {
                let mut stmt = conn.prepare(&GROUPING.replace('$', "?")).unwrap();
                let rows = stmt
                    .query_map(params![push], |r| {
                        Ok((
                            r.get(0)?,
                            r.get(1)?,
                            r.get(2)?,
                            r.get(3)?,
                            r.get::<_, i64>(4)? as u64,
                        ))
                    })
                    .unwrap();
                rows.map(Result::unwrap).collect()
            }
            Rows::Postgres(client) => client
                .query(GROUPING, &[&push])
                .await
                .unwrap()
                .iter()
                .map(|r| {
                    let n: i64 = r.get(4);
                    (r.get(0), r.get(1), r.get(2), r.get(3), n as u64)
                })
                .collect(),
        }
    }

    /// How the push's jobs stand by the grouping query.
    async fn grouped(&self, push: &str) -> PushJobs {
        let mut jobs = PushJobs::default();
        let mut done: BTreeMap<String, u64> = BTreeMap::new();
        for (kind, state, result, in_doubt, n) in self.groups(push).await {
            let send = kind == "send";
            match state.as_str() {
                "dead" => jobs.dead += n,
                "queued" | "leased" if send => jobs.queued += n,
                "queued" | "leased" => jobs.expanding = true,
                "done" if send => *done.entry(result.unwrap_or_default()).or_default() += n,
                _ => {}
            }
            if send && in_doubt {
                jobs.in_doubt += n;
            }
        }
        jobs.done = done.into_iter().collect();
        jobs
    }
}

/// Adds the direct sends that left no row to the grouped figures.
fn with_rowless(mut jobs: PushJobs, rowless: &BTreeMap<String, u64>) -> PushJobs {
    let mut done: BTreeMap<String, u64> = jobs.done.into_iter().collect();
    for (result, n) in rowless {
        *done.entry(result.clone()).or_default() += n;
    }
    jobs.done = done.into_iter().filter(|(_, n)| *n > 0).collect();
    jobs
}

fn settlement(dice: &mut Dice, now: i64) -> Settlement {
    match dice.below(4) {
        0 => Settlement::Retry {
            due_ms: now + dice.below(300) as i64,
            reason: "status 503".into(),
        },
        1 => Settlement::Dead {
            reason: "status 500".into(),
        },
        _ => {
            let result = RESULTS[dice.below(RESULTS.len() as u64) as usize];
            done(result)
        }
    }
}

/// One seed's operations; the app's jobs, pushes and counters are deleted at the end, so the
/// next seed starts from nothing on the same store.
async fn run(q: &dyn Store, rows: &Rows, seed: u64) {
    let shop = app("shop");
    q.record_push(&shop, &super::status::receipt("short", 2_000), None)
        .await
        .unwrap();
    q.record_push(&shop, &super::status::receipt("long", i64::MAX), None)
        .await
        .unwrap();
    let mut dice = Dice(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut rowless: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let mut leased: Vec<Job> = Vec::new();
    let mut now = 1_000i64;
    for step in 0..400 {
        now += dice.below(40) as i64;
        let push = *dice.pick(&PUSHES);
        let op = dice.below(10);
        match op {
            0 | 1 => {
                let jobs = (0..dice.below(6))
                    .map(|_| {
                        let device = format!("d{:02}", dice.below(40));
                        let provider = *dice.pick(&[Platform::Apns, Platform::Fcm]);
                        send(
                            "shop",
                            push,
                            provider,
                            &device,
                            now + dice.below(100) as i64,
                        )
                    })
                    .collect();
                q.enqueue(jobs).await.unwrap();
            }
            2 => q.enqueue(vec![expansion("shop", push)]).await.unwrap(),
            3 => {
                let lease_ms = 50 + dice.below(200) as i64;
                let limit = dice.below(8) as usize;
                leased.extend(q.lease(now, limit, lease_ms, &[]).await.unwrap());
            }
            4 => {
                // Settles some leased jobs (some of them settled or re-leased already).
                let n = dice.below(leased.len() as u64 + 1) as usize;
                let settled: Vec<_> = leased
                    .drain(..n)
                    .filter(|j| matches!(j.job.kind, JobKind::Send { .. }))
                    .map(|j| (j.id, settlement(&mut dice, now)))
                    .collect();
                q.settle(settled).await.unwrap();
            }
            5 => {
                let device = format!("d{:02}", dice.below(40));
                q.settle_live(&shop, &device, &[push.to_string()], now)
                    .await
                    .unwrap();
            }
            6 => {
                // A page of a leased expansion: marked in flight, then written.
                let Some(pos) = leased
                    .iter()
                    .position(|j| matches!(j.job.kind, JobKind::Expand { .. }))
                else {
                    continue;
                };
                let job = leased[pos].clone();
                if q.mark_in_flight(job.id, "d39", now, 100).await.is_err() {
                    leased.remove(pos);
                    continue;
                }
                let mut page = ExpandedPage::default();
                let mut counted: BTreeMap<String, u64> = BTreeMap::new();
                for _ in 0..dice.below(8) {
                    let device = format!("d{:02}", dice.below(40));
                    if dice.below(2) == 0 {
                        *counted.entry("accepted".into()).or_default() += 1;
                        continue;
                    }
                    let mut row = send("shop", &job.job.push, Platform::Apns, &device, now);
                    row.seq = job.job.seq;
                    let sent = (dice.below(3) > 0).then(|| settlement(&mut dice, now));
                    let in_doubt = dice.below(4) == 0;
                    page.jobs.push(PageJob {
                        job: row,
                        sent,
                        in_doubt,
                    });
                }
                page.counted = counted.clone().into_iter().collect();
                let next = (dice.below(3) > 0).then(|| format!("d{:02}", dice.below(40)));
                let finished = next.is_none();
                if q.expand_page(job.id, page, next, now, 100).await.is_ok() {
                    let mine = rowless.entry(job.job.push.clone()).or_default();
                    for (r, n) in counted {
                        *mine.entry(r).or_default() += n;
                    }
                    if finished {
                        leased.remove(pos);
                    }
                } else {
                    leased.remove(pos);
                }
            }
            7 => {
                if let Some(dead) = q.dead_letters(&shop, None, 50).await.unwrap().first() {
                    q.replay(&shop, dead.id, now).await.unwrap();
                }
            }
            8 => {
                let letters = q.dead_letters(&shop, None, 50).await.unwrap();
                if !letters.is_empty() {
                    let dead = dice.pick(&letters);
                    assert!(q.drop_dead(&shop, dead.id).await.unwrap());
                }
            }
            _ => {
                if dice.below(4) == 0 {
                    let pruned_before = 1_500 + dice.below(1_500) as i64;
                    q.prune(pruned_before).await.unwrap();
                    if pruned_before > 2_000 {
                        rowless.remove("short");
                    }
                }
            }
        }
        for push in PUSHES {
            let expected = with_rowless(
                rows.grouped(push).await,
                rowless.get(push).unwrap_or(&BTreeMap::new()),
            );
            let counted = q.push_jobs(&shop, push).await.unwrap();
            assert_eq!(
                counted, expected,
                "seed {seed}, step {step} (operation {op}), push {push}"
            );
        }
    }
    q.delete_app(&shop).await.unwrap();
    for push in PUSHES {
        assert_eq!(q.push_jobs(&shop, push).await.unwrap(), PushJobs::default());
        assert_eq!(rows.grouped(push).await, PushJobs::default());
    }
}

async fn counters_agree_with_grouping_every_job_row_over_random_operations(b: Backend) {
    let rows = Rows::open(&b).await;
    for seed in 1..=6 {
        run(b.store(), &rows, seed).await;
    }
    b.store().close().await;
}
