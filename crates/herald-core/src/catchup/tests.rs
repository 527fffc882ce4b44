//! The pager against a model of the log, the hub and the outbox, over random interleavings of
//! publishes, hub deliveries, outbox drains, retention trims and the three steps of a page read
//! (asked for, the log read at some moment, the answer handled later).

use std::collections::VecDeque;

use proptest::prelude::*;

use super::*;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Msg {
    seq: u64,
    cost: usize,
}

impl Sequenced for Msg {
    fn seq(&self) -> u64 {
        self.seq
    }
    fn cost(&self) -> usize {
        self.cost
    }
}

#[derive(Debug, Clone)]
enum Op {
    Publish(usize),
    Deliver,
    Drain(usize),
    AskPage,
    ReadLog,
    HandlePage,
    Trim(u64),
}

fn op(trims: bool) -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1usize..300).prop_map(Op::Publish),
        3 => Just(Op::Deliver),
        3 => (0usize..40).prop_map(Op::Drain),
        2 => Just(Op::AskPage),
        2 => Just(Op::ReadLog),
        2 => Just(Op::HandlePage),
        (if trims { 1 } else { 0 }) => (1u64..50).prop_map(Op::Trim),
    ]
}

/// The log, the hub's delivery position, one outbox and what its client received.
struct World {
    log: Vec<Msg>,
    first_retained: u64,
    delivered: usize,
    pager: Pager<Msg>,
    asked: Option<PageRequest>,
    read: Option<Page<Msg>>,
    /// Queued frames, each with whether it came from a page read.
    outbox: VecDeque<(Msg, bool)>,
    /// Bytes queued from page reads and not yet written.
    page_bytes: usize,
    received: Vec<u64>,
    gap: Option<Gap>,
    overflowed: bool,
    budget: usize,
    max_cost: usize,
    /// Every message costs the same, at most the pager's first guess: the budget is a hard
    /// bound then.
    fixed_cost: bool,
}

impl World {
    fn new(pending: &[usize], since: u64, budget: usize) -> Self {
        let log: Vec<Msg> = pending
            .iter()
            .enumerate()
            .map(|(i, &cost)| Msg {
                seq: i as u64 + 1,
                cost,
            })
            .collect();
        World {
            delivered: log.len(),
            max_cost: pending.iter().copied().max().unwrap_or(1),
            fixed_cost: false,
            log,
            first_retained: 1,
            pager: Pager::new(since, budget, 10_000),
            asked: None,
            read: None,
            outbox: VecDeque::new(),
            page_bytes: 0,
            received: Vec::new(),
            gap: None,
            overflowed: false,
            budget,
        }
    }

    fn done(&self) -> bool {
        self.gap.is_some() || self.overflowed
    }

    fn queue(&mut self, frames: Vec<Msg>, from_page: usize) {
        for (i, m) in frames.into_iter().enumerate() {
            let page = i < from_page;
            if page {
                self.page_bytes += m.cost;
            }
            self.outbox.push_back((m, page));
        }
    }

    fn apply(&mut self, op: &Op) {
        if self.done() {
            return;
        }
        match *op {
            Op::Publish(cost) => {
                let cost = if self.fixed_cost { self.max_cost } else { cost };
                let seq = self.log.len() as u64 + 1;
                self.max_cost = self.max_cost.max(cost);
                self.log.push(Msg { seq, cost });
            }
            Op::Deliver => {
                if self.delivered < self.log.len() {
                    let m = self.log[self.delivered].clone();
                    self.delivered += 1;
                    match self.pager.on_live(m) {
                        LiveAction::Queue(m) => self.queue(vec![m], 0),
                        LiveAction::Nothing => {}
                        LiveAction::Overflow => self.overflowed = true,
                    }
                }
            }
            Op::Drain(n) => {
                for _ in 0..n {
                    let Some((m, page)) = self.outbox.pop_front() else {
                        break;
                    };
                    if page {
                        self.page_bytes -= m.cost;
                    }
                    self.received.push(m.seq);
                }
            }
            Op::AskPage => {
                if self.asked.is_none() && self.read.is_none() {
                    self.asked = self.pager.next_read(self.page_bytes);
                }
            }
            Op::ReadLog => {
                if let Some(req) = self.asked.take() {
                    let messages = self
                        .log
                        .iter()
                        .filter(|m| m.seq > req.after && m.seq >= self.first_retained)
                        .take(req.limit)
                        .cloned()
                        .collect();
                    self.read = Some(Page {
                        messages,
                        last_seq: self.log.len() as u64,
                    });
                }
            }
            Op::HandlePage => {
                if let Some(page) = self.read.take() {
                    let (read, queued_before) = (page.messages.len(), self.page_bytes);
                    match self.pager.on_page(page) {
                        Ok(done) => self.queue(done.frames, read),
                        Err(gap) => self.gap = Some(gap),
                    }
                    // The bound: a page is read only when at most half the budget is queued,
                    // and holds at most what the free half fits at the mean cost so far, so
                    // the largest messages overshoot by their ratio to the mean at worst.
                    assert!(queued_before <= self.budget / 2);
                    let page_bound = self.budget.max(MAX_PAGE.min(self.budget) * self.max_cost);
                    assert!(self.page_bytes <= page_bound, "{} queued", self.page_bytes);
                    if self.fixed_cost {
                        assert!(self.page_bytes <= self.budget + self.max_cost);
                    }
                }
            }
            Op::Trim(n) => {
                let last = self.log.len() as u64;
                self.first_retained = (self.first_retained + n).min(last + 1);
            }
        }
    }

    /// Lets everything settle: the hub delivers all, the client drains all, pages are read.
    fn settle(&mut self) {
        for _ in 0..100_000 {
            if self.done() {
                return;
            }
            let idle = self.pager.phase() == Phase::Live
                && self.delivered == self.log.len()
                && self.outbox.is_empty();
            if idle {
                return;
            }
            for op in [
                Op::Deliver,
                Op::Drain(usize::MAX),
                Op::AskPage,
                Op::ReadLog,
                Op::HandlePage,
            ] {
                self.apply(&op);
            }
        }
        panic!("did not settle: {:?}", self.pager.phase());
    }
}

fn check(pending: Vec<usize>, since: u64, budget: usize, ops: Vec<Op>) -> World {
    let since = since.min(pending.len() as u64);
    let fixed_cost = pending.windows(2).all(|w| w[0] == w[1]) && pending.len() > 1;
    let mut world = World::new(&pending, since, budget);
    world.fixed_cost = fixed_cost && world.max_cost <= 256;
    for op in &ops {
        world.apply(op);
    }
    world.settle();
    if world.done() {
        // Ended early: what arrived is still exact up to where it stopped.
        let expected: Vec<u64> = (since + 1..).take(world.received.len()).collect();
        assert_eq!(world.received, expected, "no gap, no duplicate, ascending");
    } else {
        let expected: Vec<u64> = (since + 1..=world.log.len() as u64).collect();
        assert_eq!(
            world.received, expected,
            "every seq after the cursor, once, in order"
        );
        assert_eq!(world.pager.parked(), 0);
    }
    world
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn exact_resume_and_bounded_queue_under_any_interleaving(
        pending in prop::collection::vec(1usize..300, 0..3000),
        since in 0u64..3000,
        budget in 64usize..20_000,
        ops in prop::collection::vec(op(false), 0..400),
    ) {
        let world = check(pending, since, budget, ops);
        prop_assert!(world.gap.is_none(), "nothing was trimmed");
        prop_assert!(!world.overflowed, "parking is bounded by one read's worth of publishes");
    }

    #[test]
    fn a_trim_during_the_catch_up_ends_it_without_a_wrong_message(
        pending in prop::collection::vec(1usize..300, 0..3000),
        since in 0u64..3000,
        budget in 64usize..20_000,
        ops in prop::collection::vec(op(true), 0..400),
    ) {
        check(pending, since, budget, ops);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn with_messages_of_one_size_the_queue_stays_within_the_budget(
        cost in 1usize..=256,
        pending in 2usize..3000,
        since in 0u64..3000,
        budget in 64usize..20_000,
        ops in prop::collection::vec(op(false), 0..400),
    ) {
        let world = check(vec![cost; pending], since, budget, ops);
        prop_assert!(world.fixed_cost);
        prop_assert!(world.gap.is_none() && !world.overflowed);
    }
}

#[test]
fn a_short_catch_up_takes_one_read_and_goes_live() {
    let mut pager: Pager<Msg> = Pager::new(2, 10_000, 100);
    assert_eq!(pager.phase(), Phase::Closing);
    let req = pager.next_read(0).unwrap();
    assert_eq!(req.after, 2);
    assert_eq!(pager.on_live(Msg { seq: 4, cost: 1 }), LiveAction::Nothing);
    assert_eq!(pager.on_live(Msg { seq: 5, cost: 1 }), LiveAction::Nothing);
    let done = pager
        .on_page(Page {
            messages: (3..=4).map(|seq| Msg { seq, cost: 1 }).collect(),
            last_seq: 4,
        })
        .unwrap();
    assert!(done.live);
    let seqs: Vec<u64> = done.frames.iter().map(|m| m.seq).collect();
    assert_eq!(
        seqs,
        [3, 4, 5],
        "the parked 4 was covered by the page; 5 follows"
    );
    assert!(matches!(
        pager.on_live(Msg { seq: 5, cost: 1 }),
        LiveAction::Nothing
    ));
    assert!(matches!(
        pager.on_live(Msg { seq: 6, cost: 1 }),
        LiveAction::Queue(_)
    ));
}

#[test]
fn a_long_catch_up_waits_for_the_outbox_to_drain() {
    let mut pager: Pager<Msg> = Pager::new(0, 1000, 100);
    let req = pager.next_read(0).unwrap();
    let messages: Vec<Msg> = (1..=req.limit as u64)
        .map(|seq| Msg { seq, cost: 100 })
        .collect();
    let done = pager
        .on_page(Page {
            messages,
            last_seq: 1_000_000,
        })
        .unwrap();
    assert!(!done.live);
    assert_eq!(pager.phase(), Phase::Behind);
    let queued: usize = done.frames.iter().map(|m| m.cost).sum();
    assert!(queued <= 1000);
    assert_eq!(
        queued, 300,
        "1000 bytes at the first guess of 256 a message: 3 messages"
    );
    assert_eq!(
        pager.next_read(600),
        None,
        "more than half the budget queued"
    );
    assert_eq!(
        pager.on_live(Msg {
            seq: 1_000_001,
            cost: 100
        }),
        LiveAction::Nothing
    );
    let next = pager.next_read(400).unwrap();
    assert_eq!(next.after, 3);
    assert_eq!(
        next.limit, 6,
        "the free 600 bytes at the measured 100 bytes a message"
    );
}
