//! Integration tests against the real `herald` binary, linked into one test program (one link
//! and one binary on disk instead of one per file): each module starts its own servers on port 0.

mod support;

mod api;
mod audit;
mod burst;
mod catchup;
mod check_order;
mod cli;
mod client;
mod client_presence;
mod cluster;
mod deadlines;
mod direct_publish;
mod documented_inputs;
mod durability;
mod faults;
mod grafana;
mod hooks_api;
mod hooks_cli;
mod hooks_e2e;
mod hooks_tail;
mod http_runtime;
mod limits;
mod meteor;
mod meteor_security;
mod metrics;
mod mqtt;
mod mqtt_connect;
mod mqtt_refusals;
mod mqtt_session;
mod new_channels;
mod parking;
mod providers;
mod push;
mod pusher_api;
mod pusher_client;
mod revoke;
mod slow_consumer;
mod sse_direct;
mod sse_poll;
mod tail;
mod tls;
mod tokens;
mod usage;
mod ws;
