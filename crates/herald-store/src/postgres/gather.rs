//! How the PostgreSQL writer gathers a batch: what is queued, and under load a short wait for
//! more.
//!
//! A commit costs PostgreSQL about the same whatever its size (one statement's executor start,
//! the channel rows' update, the WAL record and the commit: a few hundred µs of CPU for one
//! message or for thirty), and each commit costs the node a round trip to PostgreSQL and a
//! publish to Redis. Under load, publishers whose answers a commit just sent come back while
//! the next one would already be running; committing at once then makes many small batches.
//!
//! So when fewer requests are queued than the last batch took, the writer waits for that many,
//! at most as long as the last commit took and never more than [`MAX_WAIT`]; then it takes
//! whatever else has queued too. A lone publisher (a last batch of one request) never waits;
//! when publishers go away, one wait times out and the next batch's size is the new
//! expectation. Every request is still answered only after its commit.

use std::time::Duration;

use tokio::sync::mpsc;

use super::writer::{AppendRequest, Request};

/// The longest the writer waits for more appends, whatever the last commit took.
pub(crate) const MAX_WAIT: Duration = Duration::from_millis(2);

/// What the last batch says about the next: how many requests it took and how long its commit
/// ran.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Gather {
    last_requests: usize,
    last_commit: Duration,
}

impl Default for Gather {
    fn default() -> Self {
        Gather {
            last_requests: 1,
            last_commit: Duration::ZERO,
        }
    }
}

/// A batch to commit: its requests and how many messages they hold.
pub(crate) struct Batch {
    pub(crate) requests: Vec<AppendRequest>,
    pub(crate) messages: usize,
}

impl Gather {
    /// For a batch holding `queued` requests: how many requests to wait for and for how long
    /// at most, or `None` to commit at once.
    pub(crate) fn wait(&self, queued: usize) -> Option<(usize, Duration)> {
        if queued >= self.last_requests {
            return None;
        }
        let wait = self.last_commit.min(MAX_WAIT);
        (!wait.is_zero()).then_some((self.last_requests, wait))
    }

    /// Records a batch of `requests` whose commit took `took`.
    pub(crate) fn committed(&mut self, requests: usize, took: Duration) {
        self.last_requests = requests.max(1);
        self.last_commit = took;
    }

    /// `first` and the appends queued behind it, up to `max_batch` messages; when that is fewer
    /// requests than the last batch took, also those that arrive within the wait
    /// ([`Gather::wait`]). A request that would overflow the batch, or is not an append, is
    /// left in `pending` and closes the batch.
    pub(crate) async fn collect(
        &self,
        first: AppendRequest,
        requests: &mut mpsc::UnboundedReceiver<Request>,
        pending: &mut Option<Request>,
        max_batch: usize,
    ) -> Batch {
        let mut batch = Batch {
            messages: first.messages.len(),
            requests: vec![first],
        };
        let mut closed = batch.drain(requests, pending, max_batch);
        let Some((wanted, wait)) = self.wait(batch.requests.len()) else {
            return batch;
        };
        let deadline = tokio::time::Instant::now() + wait;
        while !closed && batch.requests.len() < wanted && batch.messages < max_batch {
            match tokio::time::timeout_at(deadline, requests.recv()).await {
                Ok(Some(request)) => closed = !batch.take(request, pending, max_batch),
                Ok(None) | Err(_) => break,
            }
        }
        if !closed {
            batch.drain(requests, pending, max_batch);
        }
        batch
    }
}

impl Batch {
    /// Takes `request` if it is an append that fits in `max_batch` messages, else leaves it in
    /// `pending`; answers whether it was taken.
    fn take(&mut self, request: Request, pending: &mut Option<Request>, max_batch: usize) -> bool {
        match request {
            Request::Append(more) if self.messages + more.messages.len() <= max_batch => {
                self.messages += more.messages.len();
                self.requests.push(more);
                true
            }
            other => {
                *pending = Some(other);
                false
            }
        }
    }

    /// Takes what is queued while it fits; answers whether the batch is closed (full, or a
    /// request was left in `pending`).
    fn drain(
        &mut self,
        requests: &mut mpsc::UnboundedReceiver<Request>,
        pending: &mut Option<Request>,
        max_batch: usize,
    ) -> bool {
        while self.messages < max_batch {
            match requests.try_recv() {
                Ok(request) => {
                    if !self.take(request, pending, max_batch) {
                        return true;
                    }
                }
                Err(_) => return false,
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_core::log::Retention;
    use herald_core::message::NewMessage;
    use herald_core::ChannelName;
    use tokio::sync::oneshot;

    fn append(messages: usize) -> AppendRequest {
        AppendRequest {
            channel: ChannelName::parse("news").unwrap(),
            messages: (0..messages)
                .map(|_| NewMessage {
                    id: None,
                    data: bytes::Bytes::from_static(b"{}"),
                    retain: Default::default(),
                    hold: None,
                })
                .collect(),
            retention: Retention::default(),
            reply: oneshot::channel().0,
        }
    }

    fn after_batch(requests: usize, took: Duration) -> Gather {
        let mut gather = Gather::default();
        gather.committed(requests, took);
        gather
    }

    #[test]
    fn a_lone_publisher_never_waits() {
        let mut gather = Gather::default();
        assert_eq!(gather.wait(1), None);
        gather.committed(1, Duration::from_millis(1));
        assert_eq!(gather.wait(1), None);
    }

    #[test]
    fn fewer_queued_than_the_last_batch_wait_for_as_many_as_long_as_its_commit() {
        let gather = after_batch(20, Duration::from_micros(700));
        assert_eq!(gather.wait(3), Some((20, Duration::from_micros(700))));
        assert_eq!(gather.wait(20), None);
        assert_eq!(gather.wait(25), None);
    }

    #[test]
    fn the_wait_is_bounded_and_a_smaller_batch_lowers_the_expectation() {
        let mut gather = after_batch(20, Duration::from_secs(5));
        assert_eq!(gather.wait(1), Some((20, MAX_WAIT)));
        gather.committed(4, Duration::from_micros(300));
        assert_eq!(gather.wait(4), None);
        assert_eq!(gather.wait(2), Some((4, Duration::from_micros(300))));
        gather.committed(0, Duration::from_micros(300));
        assert_eq!(gather.wait(1), None);
    }

    /// The appends sent while the writer waits join the batch (the test's task sends them
    /// once the writer has yielded: on this single-threaded runtime, that is when it waits).
    #[tokio::test]
    async fn appends_that_arrive_during_the_wait_join_the_batch() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            for _ in 0..3 {
                let _ = tx.send(Request::Append(append(1)));
            }
            // Held open: the batch ends when it has as many requests as the last one.
            tokio::time::sleep(Duration::from_secs(60)).await;
        });
        let gather = after_batch(4, MAX_WAIT);
        let mut pending = None;
        let batch = gather.collect(append(1), &mut rx, &mut pending, 4096).await;
        assert_eq!((batch.requests.len(), batch.messages), (4, 4));
        assert!(pending.is_none());
    }

    #[tokio::test]
    async fn after_a_batch_of_one_the_writer_commits_at_once() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let _ = tx.send(Request::Append(append(1)));
        });
        let gather = after_batch(1, MAX_WAIT);
        let mut pending = None;
        let batch = gather.collect(append(1), &mut rx, &mut pending, 4096).await;
        assert_eq!(batch.requests.len(), 1);
    }

    #[tokio::test]
    async fn a_wait_that_times_out_commits_what_came_and_nothing_overflows() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let gather = after_batch(10, Duration::from_micros(200));
        let mut pending = None;
        let batch = gather.collect(append(1), &mut rx, &mut pending, 4096).await;
        assert_eq!(batch.requests.len(), 1);

        tx.send(Request::Append(append(3))).unwrap();
        tx.send(Request::Append(append(3))).unwrap();
        let batch = gather.collect(append(2), &mut rx, &mut pending, 6).await;
        assert_eq!((batch.requests.len(), batch.messages), (2, 5));
        assert!(matches!(pending, Some(Request::Append(ref a)) if a.messages.len() == 3));
    }
}
