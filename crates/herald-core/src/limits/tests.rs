//! The limiters' rules, without a server: bursts, isolation between apps, keys and
//! addresses, overrides, exemptions and the memory bound.

use super::*;

fn app(id: &str) -> AppId {
    AppId::parse(id).unwrap()
}

fn low() -> RateLimits {
    RateLimits {
        publish: Rate::new(1, 3600, 2),
        key_publish: Rate::new(1, 3600, 3),
        connection: Rate::new(1, 3600, 2),
        login: Rate::new(1, 3600, 1),
        ..RateLimits::off()
    }
}

#[test]
fn an_app_gets_its_burst_then_rate_limited_with_a_retry_after() {
    let l = Limiters::new(low());
    let none = AppLimits::default();
    for _ in 0..2 {
        l.check_app(&app("a"), &none, "k1", AppAction::Publish, 1)
            .unwrap();
    }
    let e = l
        .check_app(&app("a"), &none, "k1", AppAction::Publish, 1)
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::RateLimited);
    assert!(e.message.contains("limits.publish"), "{}", e.message);
    assert!(e.retry_after.unwrap() >= 1);
    // Another app, and another action, have their own buckets.
    l.check_app(&app("b"), &none, "k2", AppAction::Publish, 1)
        .unwrap();
    l.check_app(&app("a"), &none, "k1", AppAction::Push, 1)
        .unwrap();
}

#[test]
fn a_key_is_limited_on_its_own_and_a_batch_costs_at_most_the_burst() {
    let settings = RateLimits {
        publish: Rate::OFF,
        ..low()
    };
    let l = Limiters::new(settings);
    let none = AppLimits::default();
    // A batch larger than the burst takes the whole burst, and passes once.
    l.check_app(&app("a"), &none, "k1", AppAction::Publish, 500)
        .unwrap();
    let e = l
        .check_app(&app("a"), &none, "k1", AppAction::Publish, 1)
        .unwrap_err();
    assert!(e.message.contains("limits.key_publish"), "{}", e.message);
    l.check_app(&app("a"), &none, "k2", AppAction::Publish, 1)
        .unwrap();
}

#[test]
fn an_apps_own_rate_overrides_the_default_and_off_turns_it_off() {
    let l = Limiters::new(RateLimits {
        key_publish: Rate::OFF,
        ..low()
    });
    let own = AppLimits {
        publish_rate: Some(Rate::new(1, 3600, 4)),
        ..AppLimits::default()
    };
    for _ in 0..4 {
        l.check_app(&app("a"), &own, "k", AppAction::Publish, 1)
            .unwrap();
    }
    let e = l
        .check_app(&app("a"), &own, "k", AppAction::Publish, 1)
        .unwrap_err();
    assert!(e.message.contains("limits.publish_rate"), "{}", e.message);
    let off = AppLimits {
        publish_rate: Some(Rate::OFF),
        ..AppLimits::default()
    };
    for _ in 0..100 {
        l.check_app(&app("a"), &off, "k", AppAction::Publish, 1)
            .unwrap();
    }
}

#[test]
fn addresses_are_limited_apart_and_exempt_blocks_are_not() {
    let l = Limiters::new(RateLimits {
        exempt: vec!["10.0.0.0/8".parse().unwrap()],
        ..low()
    });
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    l.check_connection(ip("127.0.0.2")).unwrap();
    l.check_connection(ip("127.0.0.2")).unwrap();
    let wait = l.check_connection(ip("127.0.0.2")).unwrap_err();
    assert!(wait > Duration::ZERO);
    l.check_connection(ip("127.0.0.3")).unwrap();
    for _ in 0..10 {
        l.check_connection(ip("10.9.8.7")).unwrap();
    }
    l.check_login(ip("127.0.0.2")).unwrap();
    let e = l.check_login(ip("127.0.0.2")).unwrap_err();
    assert!(e.message.contains("limits.login"), "{}", e.message);
}

#[test]
fn a_flood_of_distinct_addresses_stays_bounded() {
    let l = Limiters::new(RateLimits {
        connection: Rate::per_second(1_000_000, 1),
        ..RateLimits::off()
    });
    let keyed = l.connections.as_ref().unwrap();
    for i in 0..(MAX_TRACKED as u32 + 20_000) {
        let _ = l.check_connection(IpAddr::V4(std::net::Ipv4Addr::from(i)));
    }
    assert!(keyed.len() <= MAX_TRACKED + 1, "{}", keyed.len());
}

#[test]
fn retry_after_is_whole_seconds_and_at_least_one() {
    assert_eq!(retry_after_secs(Duration::ZERO), 1);
    assert_eq!(retry_after_secs(Duration::from_millis(10)), 1);
    assert_eq!(retry_after_secs(Duration::from_millis(1001)), 2);
    assert_eq!(retry_after_secs(Duration::from_secs(3)), 3);
}
