//! The fence: a node that cannot tell Redis it is alive stops holding what the other nodes
//! are about to take from it (herald-core's [`ClaimHolder::fenced`]), before they do.
//!
//! - **Alive**: the presence task notes this node in `PREFIX:nodes` every presence period
//!   (`presence.rs`); each write that Redis took moves [`Fence::beat`] on, with the time
//!   written.
//! - **Fenced**: a node whose last heartbeat is [`after`] old (three presence periods, 3 s by
//!   default: two periods short of the [`crate::lost_nodes::lapse`] after which another node
//!   claims it, both derived from the one setting so they cannot disagree) is fenced: the
//!   holder of its claims is told ([`ClaimHolder::fenced`]: herald-mqtt closes its connections
//!   without ending their sessions or publishing their wills, and refuses CONNECTs), the
//!   claims say so ([`herald_core::claims::ClusterClaims::fenced`]) and `/readyz` fails
//!   (`RedisBus::link`). The deadline runs on this node's monotonic clock from when the last
//!   heartbeat's time was taken, so a write whose answer came late counts from when it was
//!   sent, never later.
//! - **Healed**: the next heartbeat Redis takes ends the fence, after [`heal`]: this node
//!   first claims its own last life (the entry it wrote before the fence, if no other node
//!   claimed it meanwhile) and tells its holder ([`ClaimHolder::node_lost`], as for any lost
//!   node), so what it let go when it fenced (sessions, wills) is ended once, also when Redis
//!   was away for every node and no node could claim another. Only then is its entry written
//!   again and CONNECTs taken.
//! - **One node** has no fence: only this bus has one.
//!
//! [`ClaimHolder::fenced`]: herald_core::claims::ClaimHolder::fenced
//! [`ClaimHolder::node_lost`]: herald_core::claims::ClaimHolder::node_lost

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fred::prelude::LuaInterface;
use parking_lot::Mutex;
use tokio::time::Instant;

use crate::bus::Shared;

/// How long a node goes without writing its heartbeat before it fences itself: two presence
/// periods short of the lapse after which the others take it for lost.
pub(crate) fn after(presence_period: Duration) -> Duration {
    crate::lost_nodes::lapse(presence_period).saturating_sub(presence_period * 2)
}

/// This node's heartbeat as Redis last took it, and whether it is fenced.
pub(crate) struct Fence {
    /// When the last heartbeat Redis took was sent (this node's monotonic clock) and the
    /// time it wrote (Unix ms).
    last: Mutex<(Instant, i64)>,
    fenced: AtomicBool,
}

impl Fence {
    /// A fence whose deadline runs from now (the bus just connected).
    pub(crate) fn new() -> Fence {
        Fence {
            last: Mutex::new((Instant::now(), herald_core::message::now_millis())),
            fenced: AtomicBool::new(false),
        }
    }

    /// Whether this node is fenced now.
    pub(crate) fn is_fenced(&self) -> bool {
        self.fenced.load(Ordering::SeqCst)
    }

    /// The heartbeat written at `sent` (writing `at_ms`) was taken by Redis: the deadline
    /// moves on, and a fence ends.
    pub(crate) fn beat(&self, sent: Instant, at_ms: i64) {
        let mut last = self.last.lock();
        if sent > last.0 {
            *last = (sent, at_ms);
        }
        drop(last);
        if self.fenced.swap(false, Ordering::SeqCst) {
            tracing::warn!("this node writes its heartbeat to Redis again: it serves MQTT again");
        }
    }

    /// The time the last heartbeat Redis took wrote (Unix ms).
    pub(crate) fn last_written_ms(&self) -> i64 {
        self.last.lock().1
    }

    /// How long ago the last heartbeat Redis took was sent.
    pub(crate) fn silent_for(&self) -> Duration {
        self.last.lock().0.elapsed()
    }
}

/// Fences this node once its heartbeat is [`after`] old, and tells the claims' holder.
pub(crate) async fn run(shared: Arc<Shared>) {
    let bound = after(shared.options.presence_period);
    loop {
        let deadline = shared.fence.last.lock().0 + bound;
        tokio::time::sleep_until(deadline).await;
        if shared.fence.last.lock().0 + bound > Instant::now() || shared.fence.is_fenced() {
            // A heartbeat came meanwhile, or the fence is up already: wait again (a fenced
            // node's next deadline is past until a beat ends the fence).
            if shared.fence.is_fenced() {
                tokio::time::sleep(shared.options.presence_period).await;
            }
            continue;
        }
        shared.fence.fenced.store(true, Ordering::SeqCst);
        tracing::warn!(
            silent_ms = shared.fence.silent_for().as_millis() as u64,
            "this node has not written its heartbeat to Redis for {bound:?}; the other nodes \
             take it for lost soon: it closes its MQTT connections (their sessions and wills \
             are ended by the node that claims it) and refuses CONNECTs until Redis answers"
        );
        if let Some(holder) = shared.claims.holder() {
            holder.fenced().await;
        }
    }
}

/// Claims this node's own last life, if no other node did (see [`crate::lost_nodes`]'s
/// script): deletes its entry from `PREFIX:nodes` if it still holds the time written last.
const CLAIM_OWN: &str = r#"
local seen = redis.call('HGET', KEYS[1], ARGV[1])
if seen and tonumber(seen) <= tonumber(ARGV[2]) then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return 1
end
return 0
"#;

/// Before a fenced node writes its heartbeat again: ends what it let go when it fenced (see
/// the module documentation). An error (Redis gone again) leaves it fenced; the next round
/// tries again.
pub(crate) async fn heal(shared: &Shared) -> Result<(), fred::error::Error> {
    let last_ms = shared.fence.last_written_ms();
    let me = format!("{:016x}", shared.node);
    let claimed: i64 = shared
        .publisher
        .eval(
            CLAIM_OWN,
            shared.names.nodes(),
            vec![me.clone(), last_ms.to_string()],
        )
        .await?;
    tracing::info!(
        node = me,
        claimed_here = claimed == 1,
        "a fenced node reaches Redis again; it ends what it let go before it serves again"
    );
    // Told even when another node claimed it: ending a lost node's sessions twice changes
    // nothing the first did, and this node then serves again only once they are ended.
    if let Some(holder) = shared.claims.holder() {
        holder.node_lost(shared.node, last_ms).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_fences_itself_two_periods_before_the_others_take_it_for_lost() {
        let period = Duration::from_secs(1);
        assert_eq!(after(period), Duration::from_secs(3));
        assert_eq!(crate::lost_nodes::lapse(period), Duration::from_secs(5));
        let short = Duration::from_millis(100);
        assert_eq!(after(short), Duration::from_millis(300));
    }
}
