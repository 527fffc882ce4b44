use crate::hub::tests::{msg, seqs};
use crate::hub::Hub;
use crate::name::topic::filter::TopicFilter;
use crate::name::ChannelName;
use crate::outbox::Outbox;
use crate::tenant::AppId;

fn channel(app: &AppId, topic: &str) -> ChannelName {
    app.channel(&ChannelName::from_topic(topic).unwrap())
}

#[test]
fn each_message_goes_to_one_member_in_turn_and_each_group_gets_every_message() {
    let hub = Hub::new();
    let app = AppId::default_app();
    let members: Vec<_> = (0..3).map(|_| Outbox::new(1 << 20)).collect();
    let _joined: Vec<_> = members
        .iter()
        .map(|out| {
            let f = TopicFilter::parse_any("a/b").unwrap();
            hub.filters().join_group(&app, "g", f, out.clone(), None)
        })
        .collect();
    let other = Outbox::new(1 << 20);
    let f = TopicFilter::parse("a/+").unwrap();
    let _h = hub.filters().join_group(&app, "h", f, other.clone(), None);
    // An exact subscriber of the channel does not hide the group from its member.
    let (sub, _) = hub.subscribe(&channel(&app, "a/b"), members[0].clone());
    sub.go_live(vec![], 0);
    let ab = channel(&app, "a/b");
    hub.deliver_all(&(1..=6).map(|seq| msg(&ab, seq)).collect::<Vec<_>>());
    hub.deliver(&msg(&channel(&app, "a/c"), 1));
    let got: Vec<Vec<u64>> = members.iter().map(|o| seqs(o)).collect();
    let mut all: Vec<u64> = got.iter().flatten().copied().collect();
    all.sort_unstable();
    // Member 0 has its exact copy of each (6) and its turns (2).
    assert_eq!(got[0].len(), 8, "{got:?}");
    assert_eq!((got[1].len(), got[2].len()), (2, 2), "{got:?}");
    assert_eq!(all.len(), 12);
    assert_eq!(
        seqs(&other),
        [1, 2, 3, 4, 5, 6, 1],
        "the other group gets every message"
    );
}

#[test]
fn a_member_leaving_hands_over_and_the_last_one_removes_the_group() {
    let hub = Hub::new();
    let app = AppId::default_app();
    let (a, b) = (Outbox::new(1 << 20), Outbox::new(1 << 20));
    let f = || TopicFilter::parse("x/#").unwrap();
    let one = hub.filters().join_group(&app, "g", f(), a.clone(), None);
    let two = hub.filters().join_group(&app, "g", f(), b.clone(), None);
    assert!(hub.filters().is_active());
    let x = channel(&app, "x/y");
    let left = one.leave();
    hub.deliver(&msg(&x, 1));
    assert!(left.hand_over(&msg(&x, 9)));
    assert_eq!(seqs(&b), [1, 9]);
    assert!(seqs(&a).is_empty());
    drop(two);
    assert!(!left.hand_over(&msg(&x, 10)), "no member left");
    assert!(!hub.filters().is_active(), "the group left the index");
    // A closed member is passed over.
    let c = Outbox::new(1 << 20);
    let d = Outbox::new(1 << 20);
    let _c = hub.filters().join_group(&app, "g", f(), c.clone(), None);
    let _d = hub.filters().join_group(&app, "g", f(), d.clone(), None);
    c.close(crate::outbox::CloseReason::SlowConsumer);
    hub.deliver_all(&[msg(&x, 1), msg(&x, 2)]);
    assert_eq!(seqs(&d), [1, 2]);
}
