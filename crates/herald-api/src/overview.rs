//! `GET /v1/overview`: the dashboard's live figures in one answer, polled every second or two.
//! With the admin key (or its session): the whole server (connections per transport,
//! subscriptions, messages published, deliveries, messages written per transport, slow-consumer
//! disconnects, delivery lag and publish latency as histograms), read from this process's
//! metrics (what `/metrics` serves), and every app (usage, live connections and channel
//! messages delivered on this node, devices, limits, and the delivery worker's figures and
//! queue depth per provider). With a publisher key: its own app only, and no server figures.
//! Counters are cumulative; the page turns them into rates.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use herald_core::message::now_millis;
use herald_core::tenant::AppId;
use herald_core::HeraldError;
use serde_json::{json, Value};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::jobs::provider_map;
use crate::prom::Samples;
use crate::Api;

/// Transports with a connection gauge (long-poll requests hold no connection).
const CONNECTION_TRANSPORTS: [&str; 6] =
    ["ws", "sse", "meteor", "meteor_control", "pusher", "mqtt"];

/// Transports messages are written to.
const WRITE_TRANSPORTS: [&str; 6] = ["ws", "sse", "poll", "meteor", "pusher", "mqtt"];

/// `GET /v1/overview`.
pub async fn overview(State(api): State<Arc<Api>>, caller: Caller) -> Result<Response, ApiError> {
    let (role, server, apps) = match &caller {
        Caller::Admin => {
            let apps = api.tenancy.apps().await.map_err(HeraldError::from)?;
            let ids: Vec<(AppId, String)> = apps.into_iter().map(|a| (a.id, a.name)).collect();
            ("admin", server_figures(&api).await, ids)
        }
        Caller::Publisher(app) => {
            let name = api
                .tenancy
                .app(app)
                .await
                .map_err(HeraldError::from)?
                .map_or_else(|| app.to_string(), |a| a.name);
            ("publisher", Value::Null, vec![(app.clone(), name)])
        }
    };
    let only = match &caller {
        Caller::Admin => None,
        Caller::Publisher(app) => Some(app),
    };
    let depth = api
        .deliverer
        .queue()
        .depth(only)
        .await
        .map_err(HeraldError::from)?;
    let figures = api.deliverer.stats().figures(only);
    let now = now_millis();
    let apps: Vec<Value> = apps
        .iter()
        .map(|(id, name)| {
            let usage = api.usage.app(id);
            json!({
                "app": id,
                "name": name,
                "connections": api.usage.live_connections(id),
                "usage": usage.totals(),
                "messages_delivered": usage.messages_delivered(),
                "devices": usage.devices(),
                "limits": usage.limits(),
                "providers": provider_map(id, &figures, &depth, now),
            })
        })
        .collect();
    Ok(axum::Json(json!({
        "role": role,
        "time_ms": now,
        "server": server,
        "apps": apps,
    }))
    .into_response())
}

/// The whole server's figures, from this process's metrics.
async fn server_figures(api: &Api) -> Value {
    // Rendering folds pending histogram samples: off the connection workers, as `/metrics`.
    let render = api.metrics.clone();
    let text = tokio::task::spawn_blocking(move || render())
        .await
        .unwrap_or_default();
    let samples = Samples::parse(&text);
    let per = |name: &str, transports: &[&str]| -> Value {
        let map: serde_json::Map<String, Value> = transports
            .iter()
            .map(|t| {
                let labels = format!("transport=\"{t}\"");
                ((*t).to_owned(), json!(samples.count(name, &labels)))
            })
            .collect();
        Value::Object(map)
    };
    json!({
        "connections": per("herald_connections", &CONNECTION_TRANSPORTS),
        "subscriptions": samples.count("herald_subscriptions", ""),
        "published": samples.count("herald_published_messages_total", ""),
        "deliveries": samples.count("herald_deliveries_total", ""),
        "written": per("herald_messages_written_total", &WRITE_TRANSPORTS),
        "slow_consumer_disconnects": samples.count("herald_slow_consumer_disconnects_total", ""),
        "delivery_lag": samples.histogram("herald_delivery_lag_seconds"),
        "publish_latency": samples.histogram("herald_publish_seconds"),
    })
}
