//! Handles to every metric on a hot path, registered once. Looking a metric up by name costs a
//! hash and a lock in the recorder; the fan-out and write paths run that per delivery or per
//! written batch, so they use these pre-registered handles instead. The Prometheus recorder must
//! be installed before the first use (`herald serve` installs it first thing); without one the
//! handles do nothing.

use std::sync::OnceLock;

use metrics::{Counter, Gauge, Histogram};

/// The hot-path metrics.
pub struct Telemetry {
    /// `herald_publish_seconds`: time to store a publish (its answer waits for this).
    pub publish_seconds: Histogram,
    /// `herald_published_messages_total`.
    pub published: Counter,
    /// `herald_subscriptions`: live subscriptions on this node.
    pub subscriptions: Gauge,
    /// `herald_deliveries_total`: messages queued to subscribers.
    pub deliveries: Counter,
    /// `herald_delivery_lag_seconds`: time from storing a message to writing it to a client.
    pub delivery_lag: Histogram,
    /// `herald_slow_consumer_disconnects_total`.
    pub slow_consumers: Counter,
    /// `herald_publishes_paced_total`: publishes that waited for room in the fan-out's backlog.
    pub publishes_paced: Counter,
    /// `herald_fanout_writer_waits_total`: gathers the fan-out thread held back until the
    /// connections' writers had taken the one before the last.
    pub fanout_writer_waits: Counter,
    /// `herald_catchup_bytes`: paged catch-up queued in outboxes and not yet taken by their
    /// writers, on this node.
    pub catchup_bytes: Gauge,
    /// `herald_catchup_queued_max_bytes`: the most paged catch-up one outbox held queued at
    /// once since the process started (the per-connection bound, observed).
    pub catchup_queued_max: Gauge,
    /// `herald_catchup_pages_total`: pages read by paged catch-ups after their first read.
    pub catchup_pages: Counter,
    /// `herald_tail_cache_reads_total{result="hit"}`: catch-up reads served from a channel's
    /// shared recent tail.
    pub tail_hits: Counter,
    /// `herald_tail_cache_reads_total{result="miss"}`: catch-up reads that went to the store
    /// while the tail cache is on.
    pub tail_misses: Counter,
    /// `herald_tail_cache_bytes`: bytes held by the shared recent tails on this node.
    pub tail_bytes: Gauge,
    /// `herald_http_direct_publishes_total`: one-message publishes answered without hyper
    /// (herald-edge's `direct_publish`).
    pub direct_publishes: Counter,
    /// `herald_messages_written_total{transport}` for ws, sse, poll, meteor, pusher and mqtt.
    pub written_ws: Counter,
    /// See `written_ws`.
    pub written_sse: Counter,
    /// See `written_ws`.
    pub written_poll: Counter,
    /// See `written_ws`.
    pub written_meteor: Counter,
    /// See `written_ws`.
    pub written_pusher: Counter,
    /// See `written_ws`.
    pub written_mqtt: Counter,
    /// `herald_connections{transport}` for ws, sse, meteor (subscribers), meteor_control,
    /// pusher and mqtt (parked connections included).
    pub connections_ws: Gauge,
    /// See `connections_ws`.
    pub connections_sse: Gauge,
    /// See `connections_ws`.
    pub connections_meteor: Gauge,
    /// See `connections_ws`.
    pub connections_meteor_control: Gauge,
    /// See `connections_ws`.
    pub connections_pusher: Gauge,
    /// See `connections_ws`.
    pub connections_mqtt: Gauge,
}

/// The process's hot-path metric handles.
pub fn telemetry() -> &'static Telemetry {
    static HANDLES: OnceLock<Telemetry> = OnceLock::new();
    HANDLES.get_or_init(|| Telemetry {
        publish_seconds: metrics::histogram!("herald_publish_seconds"),
        published: metrics::counter!("herald_published_messages_total"),
        subscriptions: metrics::gauge!("herald_subscriptions"),
        deliveries: metrics::counter!("herald_deliveries_total"),
        delivery_lag: metrics::histogram!("herald_delivery_lag_seconds"),
        slow_consumers: metrics::counter!("herald_slow_consumer_disconnects_total"),
        publishes_paced: metrics::counter!("herald_publishes_paced_total"),
        fanout_writer_waits: metrics::counter!("herald_fanout_writer_waits_total"),
        catchup_bytes: metrics::gauge!("herald_catchup_bytes"),
        catchup_queued_max: metrics::gauge!("herald_catchup_queued_max_bytes"),
        catchup_pages: metrics::counter!("herald_catchup_pages_total"),
        tail_hits: metrics::counter!("herald_tail_cache_reads_total", "result" => "hit"),
        tail_misses: metrics::counter!("herald_tail_cache_reads_total", "result" => "miss"),
        tail_bytes: metrics::gauge!("herald_tail_cache_bytes"),
        direct_publishes: metrics::counter!("herald_http_direct_publishes_total"),
        written_ws: metrics::counter!("herald_messages_written_total", "transport" => "ws"),
        written_sse: metrics::counter!("herald_messages_written_total", "transport" => "sse"),
        written_poll: metrics::counter!("herald_messages_written_total", "transport" => "poll"),
        written_meteor: metrics::counter!("herald_messages_written_total", "transport" => "meteor"),
        written_pusher: metrics::counter!("herald_messages_written_total", "transport" => "pusher"),
        written_mqtt: metrics::counter!("herald_messages_written_total", "transport" => "mqtt"),
        connections_ws: metrics::gauge!("herald_connections", "transport" => "ws"),
        connections_sse: metrics::gauge!("herald_connections", "transport" => "sse"),
        connections_meteor: metrics::gauge!("herald_connections", "transport" => "meteor"),
        connections_meteor_control: metrics::gauge!(
            "herald_connections",
            "transport" => "meteor_control"
        ),
        connections_pusher: metrics::gauge!("herald_connections", "transport" => "pusher"),
        connections_mqtt: metrics::gauge!("herald_connections", "transport" => "mqtt"),
    })
}

/// Describes every metric this crate records (the hot-path ones above, each app's usage
/// counters in `usage`, rate-limit refusals in `limits`), so `/metrics` has a `# HELP` line for
/// each. Call it once the recorder is installed: a description given before goes nowhere.
pub fn describe_metrics() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_histogram!(
        "herald_publish_seconds",
        "Time to store a publish, seconds (its answer waits for this)."
    );
    describe_counter!(
        "herald_published_messages_total",
        "Messages stored by publishes (HTTP, WebSocket, Meteor, pushes)."
    );
    describe_gauge!(
        "herald_subscriptions",
        "Live channel subscriptions on this node."
    );
    describe_counter!(
        "herald_deliveries_total",
        "Messages queued to subscribers' connections."
    );
    describe_histogram!(
        "herald_delivery_lag_seconds",
        "Time from storing a message to writing it to a client, seconds."
    );
    describe_counter!(
        "herald_slow_consumer_disconnects_total",
        "Connections closed because they fell too far behind their messages."
    );
    describe_counter!(
        "herald_publishes_paced_total",
        "Publishes that waited for room in the fan-out's backlog (fanout_backlog)."
    );
    describe_counter!(
        "herald_fanout_writer_waits_total",
        "Fan-out gathers held back until the connections' writers had taken the one before."
    );
    describe_gauge!(
        "herald_catchup_bytes",
        "Paged catch-up queued in connections' outboxes and not yet written, bytes, on this node."
    );
    describe_gauge!(
        "herald_catchup_queued_max_bytes",
        "The most paged catch-up one connection held queued at once since start, bytes."
    );
    describe_counter!(
        "herald_catchup_pages_total",
        "Pages read by paged catch-ups after their first read."
    );
    describe_counter!(
        "herald_tail_cache_reads_total",
        "Catch-up reads by result: hit (served from a channel's shared recent tail) or miss."
    );
    describe_gauge!(
        "herald_tail_cache_bytes",
        "Bytes held by the channels' shared recent tails on this node."
    );
    describe_counter!(
        "herald_http_direct_publishes_total",
        "One-message publishes answered without hyper (whole POST /v1/channels/{name}/messages)."
    );
    describe_counter!(
        "herald_messages_written_total",
        "Messages written to clients, by transport (ws, sse, poll, meteor, pusher, mqtt)."
    );
    describe_gauge!(
        "herald_connections",
        "Open client connections on this node, by transport."
    );
    describe_counter!(
        "herald_app_published_total",
        "Messages an app published (its billing figure), counted by this node."
    );
    describe_counter!(
        "herald_app_deliveries_total",
        "Pushes delivered to an app's devices, counted by this node."
    );
    describe_counter!(
        "herald_app_acks_total",
        "Pushes an app's devices acknowledged, counted by this node."
    );
    describe_gauge!(
        "herald_app_connections",
        "An app's live client connections on this node."
    );
    describe_counter!(
        "herald_rate_limited_total",
        "Requests refused by a rate limit, by limit (and app, where one is known)."
    );
}
