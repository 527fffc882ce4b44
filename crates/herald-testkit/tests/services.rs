//! The test servers start, answer, stop and start again with their data.

use herald_testkit::{Postgres, Redis, RedisCluster};

#[test]
fn postgres_starts_keeps_data_across_a_kill_and_stops() {
    let mut pg = Postgres::start().expect("postgres starts");
    pg.create_database("t").expect("createdb");
    pg.psql(
        "t",
        "create table kept (v int); insert into kept values (42)",
    )
    .expect("a write");
    pg.kill();
    assert!(
        pg.psql("t", "select 1").is_err(),
        "a killed server answers nothing"
    );
    pg.restart().expect("restarts");
    assert_eq!(pg.psql("t", "select v from kept").unwrap(), "42");
    assert!(pg.url("t").ends_with(&format!(":{}/t", pg.port())));
}

#[test]
fn a_durable_postgres_syncs_commits_and_keeps_it_across_a_restart_the_default_does_not() {
    let settings = "select current_setting('fsync') || ',' || current_setting('full_page_writes')";
    let fast = Postgres::start().expect("postgres starts");
    assert_eq!(fast.psql("postgres", settings).unwrap(), "off,off");
    let mut durable = Postgres::start_durable().expect("a durable postgres starts");
    assert_eq!(durable.psql("postgres", settings).unwrap(), "on,on");
    durable.restart().expect("restarts");
    assert_eq!(durable.psql("postgres", settings).unwrap(), "on,on");
}

#[test]
fn redis_starts_restarts_empty_and_stops() {
    let mut redis = Redis::start().expect("redis starts");
    assert_eq!(redis.cli(&["set", "k", "v"]).unwrap(), "OK");
    assert_eq!(redis.cli(&["get", "k"]).unwrap(), "v");
    redis.restart().expect("restarts");
    assert_eq!(redis.cli(&["get", "k"]).unwrap(), "", "persistence is off");
    redis.stop();
    assert!(redis.cli(&["ping"]).is_err() || redis.cli(&["ping"]).unwrap() != "PONG");
}

#[test]
fn a_tls_redis_answers_over_tls_and_keeps_tls_across_a_restart() {
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("a certificate");
    let mut redis = Redis::start_tls(&certified.cert.pem(), &certified.key_pair.serialize_pem())
        .expect("redis with TLS starts");
    assert_eq!(redis.url(), format!("rediss://localhost:{}", redis.port()));
    assert_eq!(redis.cli(&["ping"]).unwrap(), "PONG", "redis-cli over TLS");
    redis.restart().expect("restarts");
    assert_eq!(redis.cli(&["set", "k", "v"]).unwrap(), "OK");
}

#[test]
fn a_redis_cluster_of_three_masters_covers_every_slot() {
    let mut cluster = RedisCluster::start(3).expect("cluster starts");
    assert_eq!(cluster.urls().len(), 3);
    let info = cluster.nodes_mut()[0].cli(&["cluster", "info"]).unwrap();
    assert!(info.contains("cluster_slots_assigned:16384"), "{info}");
}
