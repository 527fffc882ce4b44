//! The fan-out thread: receives committed messages from the log, in commit order, and delivers
//! them through the hub. Running delivery here rather than on the store's writer thread means a
//! channel with many subscribers never holds up the next group commit, and a publisher's answer
//! never waits for subscribers to be queued. Commits that queue while the thread delivers are
//! gathered and delivered together, a channel's run of messages to each subscriber at once.
//!
//! Bursts are paced so that a message waits a bounded time, not behind everything published
//! before it: the thread delivers a gather only once the connections' writers have taken the
//! one before the last (`drain`), so a burst waits in this thread's queue rather than in
//! outboxes; the queue is counted in deliveries ([`backlog`]), and publishes to channels with
//! subscribers here wait for room in it before they are stored. The queue is also bounded in
//! commits, so a fan-out that falls behind slows commits from elsewhere (another node's, through
//! the bus) instead of growing without limit.
//!
//! **Filters registered meanwhile.** The queue counts the commits it is handed, and a filter
//! subscription registered while some wait is registered at that count
//! (`hub::filters::CommitOrder`): a gather then stops at the count, so each gather is
//! wholly before or wholly after every filter, which takes only the gathers after it (the
//! hub's filters, "Commits before a filter").

pub mod backlog;
pub(crate) mod drain;

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use crate::hub::filters::CommitOrder;
use crate::hub::Hub;
use crate::log::CommitSink;
use crate::message::SharedMessage;

use self::drain::DrainWatch;

/// Committed batches that may wait for the fan-out thread before commits block.
const QUEUE_BATCHES: usize = 1024;

/// Most messages of queued commits delivered together (see [`Hub::deliver_all`]).
const MAX_GATHERED: usize = 4096;

/// Most deliveries of queued commits delivered together: a gather to 10,000 subscribers is
/// about 13 messages, each subscriber's share of it one write.
const GATHER_DELIVERIES: usize = 128 * 1024;

/// The commit sink that hands committed messages to the fan-out thread.
pub struct FanOut {
    queue: Arc<Queue>,
    hub: Arc<Hub>,
}

/// Commits waiting for the fan-out thread.
#[derive(Default)]
struct Queue {
    state: Mutex<QueueState>,
    /// Signalled when a commit is queued or the sink is dropped.
    filled: Condvar,
    /// Signalled when the thread takes commits.
    emptied: Condvar,
}

#[derive(Default)]
struct QueueState {
    /// Each commit's messages with its deliveries (as counted when it was queued).
    commits: VecDeque<(Vec<SharedMessage>, usize)>,
    /// The sink was dropped: deliver what is queued and stop.
    closed: bool,
    /// Commits queued since the thread started (the count of the last one).
    pushed: u64,
    /// Commits taken by gathers (the count of the last one taken).
    taken: u64,
    /// Counts filters were registered at, above `taken`, rising: no gather takes the commit
    /// at one of them together with the next.
    marks: VecDeque<u64>,
}

impl Queue {
    fn push(&self, messages: Vec<SharedMessage>, deliveries: usize) {
        let mut state = self.state.lock();
        while state.commits.len() >= QUEUE_BATCHES && !state.closed {
            self.emptied.wait(&mut state);
        }
        state.commits.push_back((messages, deliveries));
        state.pushed += 1;
        drop(state);
        self.filled.notify_one();
    }

    /// Waits for queued commits and takes them, up to a gather's worth (at least one commit)
    /// and never past a filter's mark; `None` once the sink is dropped and everything was
    /// taken. With the count of the last commit taken.
    fn gather(&self) -> Option<Gather> {
        let mut state = self.state.lock();
        while state.commits.is_empty() {
            if state.closed {
                return None;
            }
            self.filled.wait(&mut state);
        }
        let (mut messages, mut deliveries) = state.commits.pop_front()?;
        state.taken += 1;
        while state.marks.front().is_some_and(|&mark| mark < state.taken) {
            state.marks.pop_front();
        }
        let stop = state.marks.front().copied().unwrap_or(u64::MAX);
        while messages.len() < MAX_GATHERED && deliveries < GATHER_DELIVERIES && state.taken < stop
        {
            let Some((more, cost)) = state.commits.pop_front() else {
                break;
            };
            state.taken += 1;
            messages.extend(more);
            deliveries += cost;
        }
        let last_commit = state.taken;
        drop(state);
        self.emptied.notify_all();
        Some(Gather {
            messages,
            deliveries,
            last_commit,
        })
    }

    fn close(&self) {
        self.state.lock().closed = true;
        self.filled.notify_all();
        self.emptied.notify_all();
    }
}

/// Commits taken together for one delivery.
struct Gather {
    messages: Vec<SharedMessage>,
    /// Their deliveries, as counted when they were queued.
    deliveries: usize,
    /// The queue's count of the last commit taken.
    last_commit: u64,
}

/// The hold on the fan-out thread for the server's tests (debug builds): while the file named
/// by `HERALD_TEST_FANOUT_HOLD` exists, the thread does not deliver the commits it gathered,
/// so a publish answered before a SUBSCRIBE reaches the hub after it (what a burst does now
/// and then, made certain).
#[cfg(debug_assertions)]
static TEST_HOLD: crate::test_hold::TestHold =
    crate::test_hold::TestHold::new("HERALD_TEST_FANOUT_HOLD");

impl CommitOrder for Queue {
    fn mark(&self) -> u64 {
        let mut state = self.state.lock();
        let mark = state.pushed;
        // At `taken` the next gather starts after it anyway.
        if mark > state.taken && state.marks.back() != Some(&mark) {
            state.marks.push_back(mark);
        }
        mark
    }
}

impl FanOut {
    /// Starts the fan-out thread for `hub`. It stops once the returned sink is dropped and
    /// everything queued has been delivered. Private to the crate: [`crate::Engine::open`]
    /// (or [`crate::Engine::open_with_bus`]) starts the one fan-out that feeds an engine's hub.
    pub(crate) fn start(hub: Arc<Hub>) -> std::io::Result<Arc<FanOut>> {
        let queue = Arc::new(Queue::default());
        hub.filters().set_commit_order(queue.clone());
        let (taking, delivering) = (queue.clone(), hub.clone());
        std::thread::Builder::new()
            .name("herald-fanout".into())
            .spawn(move || {
                // The watches of the last two gathers delivered, the older first.
                let mut older: Option<Arc<DrainWatch>> = None;
                let mut newer: Option<Arc<DrainWatch>> = None;
                loop {
                    if older.take().is_some_and(|w| w.wait(drain::MAX_WAIT)) {
                        crate::telemetry::telemetry()
                            .fanout_writer_waits
                            .increment(1);
                    }
                    let Some(gather) = taking.gather() else {
                        break;
                    };
                    #[cfg(debug_assertions)]
                    TEST_HOLD.wait();
                    delivering.backlog().remove(gather.deliveries);
                    let watch = DrainWatch::new();
                    watch.deliver(|| {
                        delivering.deliver_gather(&gather.messages, gather.last_commit)
                    });
                    older = newer.replace(watch);
                }
            })?;
        Ok(Arc::new(FanOut { queue, hub }))
    }

    /// The hub this fan-out delivers to: a networked bus sets its [`crate::hub::InterestHook`]
    /// and reads [`Hub::head_floor`] there. Messages must still reach the hub only through
    /// [`CommitSink::committed`] on this fan-out, which keeps them in order.
    pub fn hub(&self) -> &Arc<Hub> {
        &self.hub
    }

    /// Deliveries `messages` will make on this node (at least one per message, so that a
    /// commit nobody here hears of still takes its place in the queue).
    fn deliveries(&self, messages: &[SharedMessage]) -> usize {
        messages
            .chunk_by(|a, b| a.channel == b.channel)
            .map(|run| run.len() * self.hub.subscriber_count(&run[0].channel).max(1))
            .sum()
    }
}

impl Drop for FanOut {
    fn drop(&mut self) {
        self.queue.close();
    }
}

impl CommitSink for FanOut {
    fn committed(&self, messages: &[SharedMessage]) {
        let deliveries = self.deliveries(messages);
        self.hub.backlog().add(deliveries);
        self.queue.push(messages.to_vec(), deliveries);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::tests::seqs as queued;
    use crate::name::topic::filter::TopicFilter;
    use crate::outbox::Outbox;
    use crate::tenant::AppId;
    use crate::ChannelName;

    #[test]
    fn delivers_in_commit_order_on_its_own_thread() {
        let hub = Hub::new();
        let ch = ChannelName::parse("f").unwrap();
        let out = Outbox::new(1 << 20);
        let (sub, _) = hub.subscribe(&ch, out.clone());
        sub.go_live(vec![], 0);
        let fanout = FanOut::start(hub).unwrap();
        let batch = |from: u64| -> Vec<SharedMessage> {
            (from..from + 3)
                .map(|seq| crate::message::test_message(&ch, seq, b"1"))
                .collect()
        };
        fanout.committed(&batch(1));
        fanout.committed(&batch(4));
        drop(fanout);
        let mut seqs = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while seqs.len() < 6 && std::time::Instant::now() < deadline {
            seqs.extend(queued(&out));
            std::thread::yield_now();
        }
        assert_eq!(seqs, vec![1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn a_filter_registered_while_commits_wait_takes_only_the_later_ones() {
        let hub = Hub::new();
        let queue = Arc::new(Queue::default());
        hub.filters().set_commit_order(queue.clone());
        let app = AppId::default_app();
        let ab = app.channel(&ChannelName::from_topic("a/b").unwrap());
        let commit = |seq: u64| vec![crate::message::test_message(&ab, seq, b"1")];
        let (early, late, group) = (
            Outbox::new(1 << 20),
            Outbox::new(1 << 20),
            Outbox::new(1 << 20),
        );
        let mut first = hub.filters().subscriber(&app, early.clone(), None);
        assert!(first.add(TopicFilter::parse("a/+").unwrap()));
        queue.push(commit(1), 1);
        queue.push(commit(2), 1);
        // Registered while commits 1 and 2 wait for the fan-out thread.
        let mut second = hub.filters().subscriber(&app, late.clone(), None);
        assert!(second.add(TopicFilter::parse("a/#").unwrap()));
        let _member = hub.filters().join_group(
            &app,
            "g",
            TopicFilter::parse_any("a/b").unwrap(),
            group.clone(),
            None,
        );
        queue.push(commit(3), 1);
        assert!(
            !second.add(TopicFilter::parse("a/#").unwrap()),
            "a repeated filter keeps its place"
        );
        queue.push(commit(4), 1);
        queue.close();
        let mut gathers = Vec::new();
        while let Some(gather) = queue.gather() {
            hub.deliver_gather(&gather.messages, gather.last_commit);
            gathers.push((gather.messages.len(), gather.last_commit));
        }
        assert_eq!(gathers, [(2, 2), (2, 4)], "no gather across the mark");
        assert_eq!(queued(&early), [1, 2, 3, 4]);
        assert_eq!(queued(&late), [3, 4], "only what was committed after it");
        assert_eq!(queued(&group), [3, 4], "a new group likewise");
        hub.deliver_all(&commit(5));
        assert_eq!(queued(&late), [5], "a message counted by no commit");
    }
}
