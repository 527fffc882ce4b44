//! The Herald server as a library: start one with [`Server::builder`] and
//! [`ServerBuilder::start`], stop it with [`RunningServer::shutdown`]. The `herald` binary and
//! the in-process integration tests both start servers this way.
//!
//! A server owns every listener (HTTP: the API, WebSocket, SSE and long-poll; Meteor's
//! subscriber and controller ports and the MQTT listener when configured), the usage writer,
//! the `/metrics` recorder (one per process, shared by every server in it) and the wiring of
//! store, bus, hub, fan-out and engine, which [`herald_core::Engine::open_with_bus`] makes impossible to get wrong. One
//! node runs on SQLite with a [`herald_core::bus::LocalBus`]; nodes of a cluster share a
//! PostgreSQL store and talk through a Redis bus ([`settings::ClusterSettings`]).
//!
//! Modules: [`settings`] (what a server starts with), `server` (start and shutdown), `node`
//! (opening the store and the bus together), `wiring` (building the parts and joining them), `hooks` (the webhook service, and when its
//! lifecycle listener joins), `listener` (the HTTP accept loop), `http_runtime` (the runtime HTTP requests are served on), `meteor` (the
//! Meteor ports), `mqtt` (the MQTT listener), `metrics` (the process's recorder, and `/metrics` without deleted apps' series), `http_metrics` (HTTP answers by route and status class), `usage_writer`, `secrets` (the generated
//! token secret), `data_dir` (the data directory's lock), [`tls`] (certificates, their reload, the TLS
//! configurations) and [`error`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod data_dir;
pub mod error;
mod hooks;
mod http_metrics;
mod http_runtime;
mod jwks_fetch;
mod listener;
mod meteor;
mod metrics;
mod mqtt;
mod node;
mod sealed_tenancy;
mod secrets;
mod server;
pub mod settings;
pub mod tls;
#[cfg(test)]
mod usage_store;
mod usage_writer;
mod wiring;

pub use data_dir::{lock_file, LOCK_FILE};
pub use error::ServerError;
pub use node::migrate_postgres;
pub use secrets::{read_secret_file, CREDENTIALS_KEY_FILE, TOKEN_SECRET_FILE};
pub use server::{Addresses, RunningServer, Server, ServerBuilder};
pub use settings::{
    AdminSettings, ClusterSettings, MeteorPorts, MqttPort, ProviderSettings, ServerSettings,
};

/// The types a [`ServerSettings`] is made of, from the crates that own them, so a program that
/// configures a server (the `herald` binary) needs no other Herald crate.
pub mod vocabulary {
    pub use herald_core::jwks::JwksOptions;
    pub use herald_core::limits::{Cidr, Rate, RateLimits};
    pub use herald_core::log::Retention;
    pub use herald_core::namespace::{NamespaceOptions, Namespaces};
    pub use herald_core::presence::{PresenceLimits, DEFAULT_MAX_DATA_BYTES, DEFAULT_MAX_MEMBERS};
    pub use herald_core::tenant::AppId;
    pub use herald_edge::deadlines::Deadlines;
    pub use herald_edge::{EdgeSettings, DEFAULT_PARK_IDLE_AFTER};
    pub use herald_hooks::service::HooksConfig;
    pub use herald_meteor::MeteorConf;
    pub use herald_mqtt::access::{
        Action as MqttAction, Effect as MqttEffect, Rule as MqttRule, Rules as MqttRules,
    };
    pub use herald_mqtt::settings::{MqttSettings, LARGEST_PACKET as MQTT_LARGEST_PACKET};
    pub use herald_providers::destination::{Destinations, IpNet};
    pub use herald_providers::webpush::VapidKeys;
    pub use herald_push::delivery::senders::ProviderEndpoints;
    pub use herald_push::delivery::worker::DeliveryConfig;
    pub use herald_push::jobs::RetryPolicy;
    pub use herald_pusher::settings::ClientSettings as PusherClientSettings;
    pub use herald_store::{PostgresOptions, SqliteOptions, SyncMode};
}
