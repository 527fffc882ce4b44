//! The parent's side of the worker processes: starts them (re-executing this same binary with
//! the hidden `worker` subcommand), sends commands and gathers replies, and merges their rounds.

use std::net::{IpAddr, Ipv4Addr};
use std::process::Stdio;

use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command as Process};
use tokio::sync::mpsc;

use crate::proto::{Command, Event, Plan, RoundReport, WorkerConfig};
use crate::stats;

/// The worker processes of a run.
pub struct Pool {
    workers: Vec<Worker>,
    events: mpsc::UnboundedReceiver<(usize, Event)>,
    /// Connections each worker holds.
    pub held: Vec<u64>,
    next_conn: u64,
}

struct Worker {
    child: Child,
    stdin: ChildStdin,
}

/// How to re-execute this binary as a worker: `<exe> bench worker` inside `herald` (whatever
/// its file is called), `<exe> worker` inside `herald-bench`.
fn worker_command() -> anyhow::Result<Process> {
    let exe = std::env::current_exe().context("cannot find the running executable")?;
    let mut cmd = Process::new(&exe);
    cmd.args(worker_args(crate::host()));
    Ok(cmd)
}

/// The arguments that make the running program a worker.
fn worker_args(host: crate::Host) -> &'static [&'static str] {
    match host {
        crate::Host::Herald => &["bench", "worker"],
        crate::Host::Standalone => &["worker"],
    }
}

/// The source address of worker `i`: 127.0.0.(2+i) for loopback targets, so every worker has
/// ~28,000 ephemeral ports of its own.
pub fn source_ip(i: usize, target: IpAddr) -> Option<IpAddr> {
    match target {
        IpAddr::V4(v4) if v4.is_loopback() => Some(IpAddr::V4(Ipv4Addr::new(
            127,
            0,
            (2 + i / 250) as u8,
            (2 + i % 250) as u8,
        ))),
        _ => None,
    }
}

impl Pool {
    /// Starts `n` workers configured by `config(i)`.
    pub async fn start(n: usize, config: impl Fn(usize) -> WorkerConfig) -> anyhow::Result<Pool> {
        let (tx, events) = mpsc::unbounded_channel();
        let mut workers = Vec::with_capacity(n);
        for i in 0..n {
            let mut child = worker_command()?
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .kill_on_drop(true)
                .spawn()
                .context("cannot start a worker process")?;
            let mut stdin = child.stdin.take().expect("piped");
            let stdout = child.stdout.take().expect("piped");
            let mut line = serde_json::to_string(&config(i))?;
            line.push('\n');
            stdin.write_all(line.as_bytes()).await?;
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stdout).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let ev =
                        serde_json::from_str::<Event>(&line).unwrap_or_else(|e| Event::Error {
                            message: format!("worker {i} said {line:?}: {e}"),
                        });
                    if tx.send((i, ev)).is_err() {
                        return;
                    }
                }
                let _ = tx.send((
                    i,
                    Event::Error {
                        message: format!("worker {i} exited"),
                    },
                ));
            });
            workers.push(Worker { child, stdin });
        }
        Ok(Pool {
            held: vec![0; n],
            workers,
            events,
            next_conn: 0,
        })
    }

    /// Number of workers.
    pub fn len(&self) -> usize {
        self.workers.len()
    }

    /// Always false: a pool has at least one worker.
    pub fn is_empty(&self) -> bool {
        self.workers.is_empty()
    }

    /// Connections numbered so far (ready or not): the next `open` starts at this number.
    pub fn next_conn(&self) -> u64 {
        self.next_conn
    }

    /// Connections ready across workers (including any lost since).
    pub fn held_total(&self) -> u64 {
        self.held.iter().sum()
    }

    /// Process ids of the workers (for CPU accounting).
    pub fn pids(&self) -> Vec<u32> {
        self.workers.iter().filter_map(|w| w.child.id()).collect()
    }

    async fn send(&mut self, i: usize, cmd: &Command) -> anyhow::Result<()> {
        let mut line = serde_json::to_string(cmd)?;
        line.push('\n');
        self.workers[i]
            .stdin
            .write_all(line.as_bytes())
            .await
            .with_context(|| format!("worker {i} is gone"))
    }

    /// Sends one command to each worker in `targets` and waits for every reply; `progress` sees
    /// the sum of the workers' progress counts.
    pub async fn request(
        &mut self,
        cmds: Vec<(usize, Command)>,
        mut progress: impl FnMut(u64, u64),
    ) -> anyhow::Result<Vec<(usize, Event)>> {
        let mut waiting = vec![false; self.workers.len()];
        for (i, cmd) in &cmds {
            self.send(*i, cmd).await?;
            waiting[*i] = true;
        }
        let mut counts = vec![(0u64, 0u64); self.workers.len()];
        let mut replies = Vec::new();
        while waiting.iter().any(|w| *w) {
            let Some((i, ev)) = self.events.recv().await else {
                bail!("every worker exited");
            };
            match ev {
                Event::Progress { done, failed } => {
                    counts[i] = (done, failed);
                    let (d, f) = counts.iter().fold((0, 0), |(a, b), (c, d)| (a + c, b + d));
                    progress(d, f);
                }
                Event::Error { message } => bail!("{message}"),
                ev => {
                    waiting[i] = false;
                    replies.push((i, ev));
                }
            }
        }
        replies.sort_by_key(|(i, _)| *i);
        Ok(replies)
    }

    /// Opens `count` more connections, spread so that every worker holds about as many, and
    /// returns (ready, failed, error samples).
    pub async fn open(
        &mut self,
        count: u64,
        plan: Plan,
        progress: impl FnMut(u64, u64),
    ) -> anyhow::Result<(u64, u64, Vec<String>)> {
        let mut shares = vec![0u64; self.workers.len()];
        for _ in 0..count {
            let i = (0..shares.len())
                .min_by_key(|&i| self.held[i] + shares[i])
                .expect("at least one worker");
            shares[i] += 1;
        }
        let mut cmds = Vec::new();
        for (i, share) in shares.iter().enumerate() {
            if *share == 0 {
                continue;
            }
            cmds.push((
                i,
                Command::Open {
                    first: self.next_conn,
                    count: *share,
                    plan: plan.clone(),
                    concurrency: 200,
                },
            ));
            self.next_conn += share;
        }
        let replies = self.request(cmds, progress).await?;
        let (mut ok, mut failed, mut errors) = (0, 0, Vec::new());
        for (i, ev) in replies {
            if let Event::Opened {
                ok: o,
                failed: f,
                errors: e,
            } = ev
            {
                self.held[i] += o;
                ok += o;
                failed += f;
                for e in e {
                    if errors.len() < 5 && !errors.contains(&e) {
                        errors.push(e);
                    }
                }
            }
        }
        Ok((ok, failed, errors))
    }

    /// Sends the same command to every worker holding connections (or all, if `all`).
    pub async fn broadcast(
        &mut self,
        cmd: Command,
        all: bool,
    ) -> anyhow::Result<Vec<(usize, Event)>> {
        let cmds = (0..self.workers.len())
            .filter(|&i| all || self.held[i] > 0)
            .map(|i| (i, cmd.clone()))
            .collect();
        self.request(cmds, |_, _| {}).await
    }

    /// Asks every worker to report its round once it has seen `per_conn_messages` deliveries
    /// and `per_conn_acks` acknowledgements per connection it holds; merges the reports.
    pub async fn collect(
        &mut self,
        per_conn_messages: u64,
        per_conn_acks: u64,
        timeout_ms: u64,
    ) -> anyhow::Result<Round> {
        let cmds = (0..self.workers.len())
            .filter(|&i| self.held[i] > 0)
            .map(|i| {
                (
                    i,
                    Command::Collect {
                        per_conn_messages,
                        per_conn_acks,
                        timeout_ms,
                    },
                )
            })
            .collect();
        let replies = self.request(cmds, |_, _| {}).await?;
        let mut round = Round::default();
        for (_, ev) in replies {
            if let Event::Collected(r) = ev {
                round.add(&r)?;
            }
        }
        Ok(round)
    }

    /// Closes every worker.
    pub async fn close(mut self) {
        for i in 0..self.workers.len() {
            let _ = self.send(i, &Command::Close).await;
        }
        for w in &mut self.workers {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), w.child.wait()).await;
            let _ = w.child.start_kill();
        }
    }
}

/// One time bucket of a merged round.
#[derive(Debug)]
pub struct RoundBucket {
    /// Deliveries.
    pub messages: u64,
    /// Acknowledgements.
    pub acks: u64,
    /// Errors.
    pub errors: u64,
    /// Delivery latency.
    pub hist: Histogram<u64>,
}

impl Default for RoundBucket {
    fn default() -> Self {
        RoundBucket {
            messages: 0,
            acks: 0,
            errors: 0,
            hist: stats::histogram(),
        }
    }
}

/// A round merged across workers.
#[derive(Debug)]
pub struct Round {
    /// Deliveries.
    pub messages: u64,
    /// Subscription acknowledgements.
    pub acks: u64,
    /// Publish acknowledgements.
    pub published: u64,
    /// Errors.
    pub errors: u64,
    /// Connections lost during the round.
    pub disconnected: u64,
    /// Connections still open.
    pub alive: u64,
    /// Delivery latency.
    pub msg_hist: Histogram<u64>,
    /// Acknowledgement latency.
    pub ack_hist: Histogram<u64>,
    /// First delivery or acknowledgement (unix nanos; 0 when none).
    pub first_ns: u64,
    /// Last delivery or acknowledgement.
    pub last_ns: u64,
    /// Per time bucket: deliveries, acknowledgements, errors, delivery latency.
    pub buckets: Vec<RoundBucket>,
    /// Error messages.
    pub error_samples: Vec<String>,
}

impl Default for Round {
    fn default() -> Self {
        Round {
            messages: 0,
            acks: 0,
            published: 0,
            errors: 0,
            disconnected: 0,
            alive: 0,
            msg_hist: stats::histogram(),
            ack_hist: stats::histogram(),
            first_ns: 0,
            last_ns: 0,
            buckets: Vec::new(),
            error_samples: Vec::new(),
        }
    }
}

impl Round {
    fn add(&mut self, r: &RoundReport) -> anyhow::Result<()> {
        self.messages += r.messages;
        self.acks += r.acks;
        self.published += r.published;
        self.errors += r.errors;
        self.disconnected += r.disconnected;
        self.alive += r.alive;
        stats::merge(&mut self.msg_hist, &stats::decode(&r.msg_hist)?);
        stats::merge(&mut self.ack_hist, &stats::decode(&r.ack_hist)?);
        if r.first_ns != 0 && (self.first_ns == 0 || r.first_ns < self.first_ns) {
            self.first_ns = r.first_ns;
        }
        self.last_ns = self.last_ns.max(r.last_ns);
        if self.buckets.len() < r.buckets.len() {
            self.buckets
                .resize_with(r.buckets.len(), RoundBucket::default);
        }
        for (into, b) in self.buckets.iter_mut().zip(&r.buckets) {
            into.messages += b.messages;
            into.acks += b.acks;
            into.errors += b.errors;
            if !b.hist.is_empty() {
                stats::merge(&mut into.hist, &stats::decode(&b.hist)?);
            }
        }
        for e in &r.error_samples {
            if self.error_samples.len() < 5 && !self.error_samples.contains(e) {
                self.error_samples.push(e.clone());
            }
        }
        Ok(())
    }
}
