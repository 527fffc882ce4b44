//! Lost nodes, for the claims' holder ([`herald_core::claims::ClaimHolder::node_lost`]): the
//! node that ends what a crashed node held (herald-mqtt: its connections' sessions and wills).
//!
//! - **Alive**: every node notes when it was last alive in the hash `PREFIX:nodes` (the node
//!   in hex, Unix ms), with its presence counts, every presence period (`presence.rs`).
//! - **Lost**: a node not seen for [`lapse`] (five presence periods, 5 s by default: longer
//!   than the three after which its counts are no longer summed, so a node that is only slow
//!   is not taken for dead) is lost.
//! - **Claimed once**: every period, a node whose claims have a holder reads the hash and, for
//!   each other node not seen within the lapse, runs [`CLAIM`]: it deletes the node's entry
//!   only if the entry is still that old, and answers when the node was last seen. Only the
//!   call that deleted it gets an answer, so of the nodes alive one claims a lost node and
//!   tells its holder, with the time it was last seen (its time of death).
//! - **Not really dead**: a node cut off from Redis longer than the lapse is taken for lost,
//!   though its connections live on; it writes its entry again once Redis answers.
//! - **Restarts**: a node's id is new at each start, so a node that crashed and came back is
//!   another node; its last life lapses and is claimed like any lost node (by it, too).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use fred::prelude::{HashesInterface, LuaInterface};
use herald_core::message::now_millis;

use crate::bus::Shared;

/// Deletes node `ARGV[1]`'s entry from the hash `KEYS[1]` if it was last seen at or before
/// `ARGV[2]` (ms); answers when it was last seen, or nil when it was not deleted here.
const CLAIM: &str = r#"
local seen = redis.call('HGET', KEYS[1], ARGV[1])
if seen and tonumber(seen) <= tonumber(ARGV[2]) then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return tonumber(seen)
end
return false
"#;

/// How long a node is not seen before it is taken for lost.
pub(crate) fn lapse(presence_period: Duration) -> Duration {
    presence_period * 5
}

/// Claims the lost nodes every presence period, once this node's claims have a holder.
pub(crate) async fn run(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(shared.options.presence_period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if shared.claims.holder().is_none() {
            continue;
        }
        if let Err(error) = claim_lost(&shared).await {
            let error = crate::error::in_words(&error);
            tracing::debug!(%error, "the Redis bus cannot look for lost nodes yet");
        }
    }
}

/// Claims every other node not seen within the lapse, and tells the holder of each this call
/// claimed.
async fn claim_lost(shared: &Shared) -> Result<(), fred::error::Error> {
    let nodes: HashMap<String, i64> = shared.publisher.hgetall(shared.names.nodes()).await?;
    let seen_before = now_millis() - lapse(shared.options.presence_period).as_millis() as i64;
    let me = format!("{:016x}", shared.node);
    for (node, seen) in nodes {
        if node == me || seen > seen_before {
            continue;
        }
        let Ok(id) = u64::from_str_radix(&node, 16) else {
            continue;
        };
        let claimed: Option<i64> = shared
            .publisher
            .eval(
                CLAIM,
                shared.names.nodes(),
                vec![node.clone(), seen_before.to_string()],
            )
            .await?;
        let Some(last_seen) = claimed else {
            continue;
        };
        tracing::info!(
            node,
            last_seen,
            "a cluster node was lost; this node ends what it held"
        );
        if let Some(holder) = shared.claims.holder() {
            holder.node_lost(id, last_seen).await;
        }
    }
    Ok(())
}
