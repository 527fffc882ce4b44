//! `herald bench apns|fcm|webpush`: provider client throughput against the mock providers,
//! Pushy's benchmark table (threads × connections → notifications/s). For every pair it sends
//! N notifications through Herald's client and, in the same run and on the same runtime, the
//! same N requests through a raw h2 client (`raw`), alternating (Herald, raw, Herald, raw for
//! `--rounds 2`), and reports both rates, Herald's ratio to raw, and who used the CPU: this
//! process and the mock, which runs as a separate process (`herald mock <provider>`, `mock`)
//! on the same cores.

mod apns;
mod args;
mod drive;
mod fcm;
pub(crate) mod mock;
mod raw;
mod report;
mod webpush;

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};

pub use args::{Counts, ProviderArgs};
use drive::{drive, Phase, Sender};
use mock::MockProcess;

/// The provider a run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// APNs (token auth).
    Apns,
    /// FCM HTTP v1.
    Fcm,
    /// Web Push (aes128gcm, VAPID).
    WebPush,
}

impl Provider {
    /// The scenario's and the mock's name.
    pub fn name(self) -> &'static str {
        match self {
            Provider::Apns => "apns",
            Provider::Fcm => "fcm",
            Provider::WebPush => "webpush",
        }
    }

    /// Notifications per phase when `--notifications` is not given: the Web Push mock
    /// decrypts every message, so it takes far fewer per second.
    fn default_notifications(self) -> u64 {
        match self {
            Provider::Apns | Provider::Fcm => 200_000,
            Provider::WebPush => 20_000,
        }
    }
}

/// Everything the contenders need from a running mock.
enum Setup {
    Apns(apns::ApnsSetup),
    Fcm(fcm::FcmSetup),
    WebPush(webpush::WebPushSetup),
}

impl Setup {
    fn read(provider: Provider, mock: &MockProcess) -> anyhow::Result<Setup> {
        Ok(match provider {
            Provider::Apns => Setup::Apns(apns::ApnsSetup::read(mock)?),
            Provider::Fcm => Setup::Fcm(fcm::FcmSetup::read(mock)?),
            Provider::WebPush => Setup::WebPush(webpush::WebPushSetup::read(mock)?),
        })
    }

    /// Herald's client and the raw client, each with `connections` connections.
    async fn contenders(&self, connections: usize) -> anyhow::Result<(Sender, Sender)> {
        Ok(match self {
            Setup::Apns(s) => (s.herald(connections)?, s.raw(connections).await?),
            Setup::Fcm(s) => (s.herald(connections)?, s.raw(connections).await?),
            Setup::WebPush(s) => (s.herald(connections)?, s.raw(connections).await?),
        })
    }
}

/// One (threads, connections) pair: every round's phase for each contender.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub threads: usize,
    pub connections: usize,
    pub herald: Vec<Phase>,
    pub raw: Vec<Phase>,
    /// Notifications the mock accepted during the warm-up (not measured).
    pub warm_accepted: u64,
}

/// What a row needs to know about the run.
#[derive(Clone, Copy)]
struct RowPlan {
    threads: usize,
    connections: usize,
    notifications: u64,
    in_flight: usize,
    rounds: u32,
    mock_pid: u32,
    deadline: Instant,
}

/// Runs `herald bench <provider>`.
pub async fn run(args: ProviderArgs, provider: Provider) -> anyhow::Result<crate::report::Report> {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.time_limit);
    let notifications = args
        .notifications
        .unwrap_or_else(|| provider.default_notifications());
    if notifications == 0 || args.rounds == 0 {
        bail!("--notifications and --rounds must be at least 1");
    }
    let bin = crate::server::server_binary(args.mock_bin.as_deref())?;
    let extra = match provider {
        Provider::WebPush => vec!["--subscriptions".into(), args.subscriptions.to_string()],
        _ => Vec::new(),
    };
    crate::scenario::status(&format!("starting herald mock {}", provider.name()));
    let mock = MockProcess::start(&bin, provider.name(), &extra)?;
    let setup = std::sync::Arc::new(Setup::read(provider, &mock)?);
    let encryption = match &*setup {
        Setup::WebPush(s) => {
            crate::scenario::status("measuring encryption alone");
            Some(s.encryption_cost(args.encryptions)?)
        }
        _ => None,
    };
    let whole = crate::server::CpuMark::now(Some(mock.pid), &[]);
    let mock_before = crate::server::ProcStats::read(mock.pid);
    let mut rows = Vec::new();
    let mut stopped_by_time = None;
    'rows: for &threads in &args.threads.0 {
        for &connections in &args.connections.0 {
            crate::scenario::status(&format!(
                "{}: {threads} threads, {connections} connections, {} rounds of {notifications} each",
                provider.name(),
                args.rounds
            ));
            let plan = RowPlan {
                threads,
                connections,
                notifications,
                in_flight: args.in_flight,
                rounds: args.rounds,
                mock_pid: mock.pid,
                deadline,
            };
            match run_row_on_own_runtime(setup.clone(), plan).await {
                Ok(row) => rows.push(row),
                Err(RowError::Time) => {
                    stopped_by_time = Some(format!(
                        "time: --time-limit {}s reached at {threads} threads, {connections} connections",
                        args.time_limit
                    ));
                    break 'rows;
                }
                Err(RowError::Failed(e)) => return Err(e),
            }
        }
    }
    let cpu = whole.share(&crate::server::CpuMark::now(Some(mock.pid), &[]));
    let mock_after = crate::server::ProcStats::read(mock.pid);
    let mock_pid = mock.pid;
    let mock_accepted = tokio::task::spawn_blocking(move || mock.stop()).await?;
    Ok(report::build(report::Inputs {
        provider,
        args: &args,
        notifications,
        rows: &rows,
        cpu,
        mock_pid,
        mock_accepted,
        mock_cpu_seconds: mock_before
            .zip(mock_after)
            .map(|(a, b)| b.cpu_seconds - a.cpu_seconds),
        mock_peak_rss_bytes: mock_after.map(|m| m.peak_rss_bytes),
        encryption,
        stopped_by_time,
        duration_s: started.elapsed().as_secs_f64(),
    }))
}

/// Why a row has no result.
enum RowError {
    /// The time limit passed.
    Time,
    /// Something failed (the mock refused, a connection could not be made).
    Failed(anyhow::Error),
}

/// Runs one row on a runtime of its own with `plan.threads` workers (on a thread of its own,
/// since a runtime cannot be blocked on from inside another).
async fn run_row_on_own_runtime(
    setup: std::sync::Arc<Setup>,
    plan: RowPlan,
) -> Result<Row, RowError> {
    let thread = std::thread::Builder::new()
        .name(format!("bench-row-{}x{}", plan.threads, plan.connections))
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(plan.threads.max(1))
                .enable_all()
                .build()
                .map_err(|e| RowError::Failed(e.into()))?;
            let row = runtime.block_on(run_row(&setup, plan));
            runtime.shutdown_background();
            row
        })
        .map_err(|e| RowError::Failed(e.into()))?;
    tokio::task::spawn_blocking(move || thread.join())
        .await
        .map_err(|e| RowError::Failed(e.into()))?
        .map_err(|_| RowError::Failed(anyhow!("the row's thread panicked")))?
}

async fn run_row(setup: &Setup, plan: RowPlan) -> Result<Row, RowError> {
    let left = || plan.deadline.saturating_duration_since(Instant::now());
    let (herald, raw) = tokio::time::timeout(left(), setup.contenders(plan.connections))
        .await
        .map_err(|_| RowError::Time)?
        .map_err(RowError::Failed)?;
    // Warm-up, not measured: one send alone (Herald's client sends one request until APNs has
    // accepted its first token), then enough to open every connection.
    let warm = (plan.notifications / 20).clamp(plan.connections as u64 * 10, 5_000);
    let mut warm_accepted = 0;
    for (name, send) in [("Herald", &herald), ("raw", &raw)] {
        let first = tokio::time::timeout(left(), send(0))
            .await
            .map_err(|_| RowError::Time)?;
        if let Err(e) = first {
            return Err(RowError::Failed(anyhow!(
                "the mock refused the {name} client's first notification: {e}"
            )));
        }
        warm_accepted += 1;
        let phase = tokio::time::timeout(left(), drive(send, warm, plan.in_flight, plan.mock_pid))
            .await
            .map_err(|_| RowError::Time)?;
        if let Some(e) = phase.first_error.filter(|_| phase.failed == warm) {
            return Err(RowError::Failed(anyhow!(
                "the mock refused every warm-up notification of the {name} client: {e}"
            )));
        }
        warm_accepted += phase.accepted;
    }
    let mut row = Row {
        threads: plan.threads,
        connections: plan.connections,
        herald: Vec::new(),
        raw: Vec::new(),
        warm_accepted,
    };
    for _ in 0..plan.rounds {
        for (send, phases) in [(&herald, &mut row.herald), (&raw, &mut row.raw)] {
            let phase = tokio::time::timeout(
                left(),
                drive(send, plan.notifications, plan.in_flight, plan.mock_pid),
            )
            .await
            .map_err(|_| RowError::Time)?;
            phases.push(phase);
        }
    }
    Ok(row)
}
