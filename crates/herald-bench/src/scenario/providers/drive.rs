//! The driver both contenders run under: notifications `0..n` sent by `in_flight` lanes (tasks
//! on the row's runtime, lane k sending k, k + W, k + 2W, ...), each waiting for one answer
//! before its next send, so at most `in_flight` requests are outstanding. It times the whole
//! phase and reads the CPU time of this process and of the mock over it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use crate::server::{CpuMark, CpuShare};

/// One send's future: `Ok` when the provider accepted the notification, else why not.
pub(crate) type SendFuture = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// Sends notification number `i` (the number picks the device).
pub(crate) type Sender = Arc<dyn Fn(u64) -> SendFuture + Send + Sync>;

/// What one phase (one contender sending `n`) measured.
#[derive(Debug, Clone, Default)]
pub(crate) struct Phase {
    /// Notifications sent.
    pub sent: u64,
    /// Accepted by the mock.
    pub accepted: u64,
    /// Not accepted (any answer but the provider's success, or no answer).
    pub failed: u64,
    /// The first failure's reason.
    pub first_error: Option<String>,
    /// Wall time of the phase, seconds.
    pub seconds: f64,
    /// CPU over the phase: `server_cores` is the mock's, `loadgen_cores` this process's.
    pub cpu: CpuShare,
    /// This process's read and write system calls over the phase (`syscr`, `syscw` of
    /// /proc/self/io): how well the client batched its HTTP/2 frames.
    pub syscalls: Option<(u64, u64)>,
}

impl Phase {
    /// Accepted notifications per second.
    pub fn per_sec(&self) -> f64 {
        self.accepted as f64 / self.seconds.max(1e-9)
    }

    /// This process's CPU seconds over the phase.
    pub fn client_cpu_seconds(&self) -> f64 {
        self.cpu.loadgen_cores * self.seconds
    }

    /// The mock's CPU seconds over the phase.
    pub fn mock_cpu_seconds(&self) -> f64 {
        self.cpu.server_cores.unwrap_or(0.0) * self.seconds
    }
}

/// Sends notifications `0..n` through `send` with at most `in_flight` outstanding.
pub(crate) async fn drive(send: &Sender, n: u64, in_flight: usize, mock_pid: u32) -> Phase {
    let lanes = (in_flight.max(1) as u64).min(n.max(1));
    let syscalls_before = syscalls();
    let before = CpuMark::now(Some(mock_pid), &[]);
    let started = Instant::now();
    let mut handles = Vec::with_capacity(lanes as usize);
    for lane in 0..lanes {
        let send = send.clone();
        handles.push(tokio::spawn(async move {
            let mut lane_result = Phase::default();
            let mut i = lane;
            while i < n {
                lane_result.sent += 1;
                match send(i).await {
                    Ok(()) => lane_result.accepted += 1,
                    Err(e) => {
                        lane_result.failed += 1;
                        lane_result.first_error.get_or_insert(e);
                    }
                }
                i += lanes;
            }
            lane_result
        }));
    }
    let mut phase = Phase::default();
    for handle in handles {
        let lane = handle.await.unwrap_or_else(|e| Phase {
            failed: 1,
            first_error: Some(format!("a sending task failed: {e}")),
            ..Phase::default()
        });
        phase.sent += lane.sent;
        phase.accepted += lane.accepted;
        phase.failed += lane.failed;
        if phase.first_error.is_none() {
            phase.first_error = lane.first_error;
        }
    }
    phase.seconds = started.elapsed().as_secs_f64();
    phase.cpu = before.share(&CpuMark::now(Some(mock_pid), &[]));
    phase.syscalls = syscalls_before
        .zip(syscalls())
        .map(|((r0, w0), (r1, w1))| (r1.saturating_sub(r0), w1.saturating_sub(w0)));
    phase
}

/// Read and write system calls this process has made (`syscr`, `syscw` of /proc/self/io).
fn syscalls() -> Option<(u64, u64)> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    let field = |name: &str| -> Option<u64> {
        io.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
    };
    Some((field("syscr:")?, field("syscw:")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_notification_is_sent_once_and_failures_are_counted() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = seen.clone();
        let send: Sender = Arc::new(move |i| {
            let record = record.clone();
            Box::pin(async move {
                record.lock().expect("lock").push(i);
                if i % 10 == 3 {
                    Err(format!("refused {i}"))
                } else {
                    Ok(())
                }
            })
        });
        let phase = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            drive(&send, 105, 8, std::process::id()),
        )
        .await
        .expect("bounded");
        assert_eq!(phase.sent, 105);
        assert_eq!(phase.failed, 11);
        assert_eq!(phase.accepted, 94);
        assert!(phase.first_error.unwrap().starts_with("refused"));
        let mut all = seen.lock().expect("lock").clone();
        all.sort_unstable();
        assert_eq!(all, (0..105).collect::<Vec<_>>());
    }
}
