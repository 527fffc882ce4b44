//! One broadcast page's sends, run by one task of the page instead of a task per send.
//!
//! A task per send cost the server a spawn (allocation, the runtime's task list, often a
//! wake-up of the other worker thread) and a join for every device. Here the expansion hands
//! each send's future to the page's task ([`PageSends::start`]), which polls them all at once
//! in a [`FuturesUnordered`] as they come and returns their results when the expansion has
//! handed over the page's last send ([`PageSends::finish`]) and every one has answered. A send
//! starts as soon as it is handed over, as a spawned one did; dropping the page (a failed or
//! stopped expansion) aborts the sends still running, as dropping a `JoinSet` did.

use std::future::Future;
use std::pin::Pin;

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::task::{JoinError, JoinSet};

/// A send's future, boxed (a send's future is large; see `broadcast`).
pub type SendFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// The sends of one page: started one by one, their results taken together.
pub struct PageSends<T> {
    /// Hands sends to the page's task; dropped by [`PageSends::finish`].
    start: Option<UnboundedSender<SendFuture<T>>>,
    /// The page's task (one), aborted if this is dropped before it finished.
    task: JoinSet<Vec<T>>,
}

impl<T: Send + 'static> PageSends<T> {
    /// A page with no sends yet: spawns its task, which waits for them.
    pub fn spawn() -> PageSends<T> {
        let (start, sends) = unbounded_channel();
        let mut task = JoinSet::new();
        task.spawn(run(sends));
        PageSends {
            start: Some(start),
            task,
        }
    }

    /// Starts one send (the page's task polls it from now on).
    pub fn start(&self, send: SendFuture<T>) {
        if let Some(start) = &self.start {
            // The task ends only once `start` is dropped, or if aborted (then the page is
            // being dropped and its results are not wanted).
            let _ = start.send(send);
        }
    }

    /// No more sends will be started: the page's task finishes once all have answered.
    pub fn finish(&mut self) {
        self.start = None;
    }

    /// Every send's result (in the order they answered), once all have answered. Call after
    /// [`PageSends::finish`].
    pub async fn results(mut self) -> Result<Vec<T>, JoinError> {
        self.start = None;
        match self.task.join_next().await {
            Some(results) => results,
            None => Ok(Vec::new()),
        }
    }
}

/// The page's task: polls every send handed over until the hand-over ends and all answered.
async fn run<T>(mut sends: UnboundedReceiver<SendFuture<T>>) -> Vec<T> {
    let mut running = FuturesUnordered::new();
    let mut results = Vec::new();
    let mut open = true;
    loop {
        tokio::select! {
            biased;
            // Answers first: each frees a permit the expansion may be waiting for.
            Some(result) = running.next(), if !running.is_empty() => results.push(result),
            send = sends.recv(), if open => match send {
                Some(send) => running.push(send),
                None => open = false,
            },
            else => return results,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn every_send_started_answers_once_and_none_waits_for_the_end() {
        let mut page = PageSends::spawn();
        let (first_done, first_answered) = tokio::sync::oneshot::channel();
        page.start(Box::pin(async move {
            let _ = first_done.send(());
            0usize
        }));
        // The first send runs before the page is finished.
        tokio::time::timeout(Duration::from_secs(5), first_answered)
            .await
            .expect("a started send runs at once")
            .unwrap();
        for i in 1..100usize {
            page.start(Box::pin(async move {
                tokio::task::yield_now().await;
                i
            }));
        }
        page.finish();
        let mut results = tokio::time::timeout(Duration::from_secs(5), page.results())
            .await
            .expect("results once all answered")
            .unwrap();
        results.sort_unstable();
        assert_eq!(results, (0..100).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn a_page_with_no_sends_has_no_results() {
        let mut page: PageSends<u8> = PageSends::spawn();
        page.finish();
        let results = tokio::time::timeout(Duration::from_secs(5), page.results())
            .await
            .expect("an empty page ends")
            .unwrap();
        assert!(results.is_empty());
    }

    #[tokio::test]
    async fn dropping_a_page_aborts_its_sends() {
        let page = PageSends::spawn();
        let (dropped, was_dropped) = tokio::sync::oneshot::channel::<()>();
        page.start(Box::pin(async move {
            let _guard = dropped;
            std::future::pending::<()>().await;
        }));
        drop(page);
        // The send's future is dropped with the task: its end of the channel closes.
        let closed = tokio::time::timeout(Duration::from_secs(5), was_dropped)
            .await
            .expect("the send is dropped with the page");
        assert!(closed.is_err());
    }
}
