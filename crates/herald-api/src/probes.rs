//! The probes a load balancer or an orchestrator watches a node with.
//!
//! - `GET /healthz`, **liveness**: the process serves HTTP and does not need a restart. It
//!   fails (`503 store_halted`) only once the store stopped taking writes after a failed fsync,
//!   which only a restart clears ([`herald_core::log::StoreError::needs_restart`]); an
//!   orchestrator restarting the server on it is the cure. A full disk or an unreachable
//!   database clears by itself, and a restart would only drop every live connection: those
//!   are readiness failures.
//! - `GET /readyz`, **readiness**: the node can do its work now. The store takes writes
//!   ([`herald_core::Engine::store_takes_writes`]: SQLite without a write fault, PostgreSQL reachable and a
//!   primary, as its last commit or a check at most once a second found), the bus reaches the
//!   other nodes where there are some ([`herald_core::bus::Bus::link`]), and the server is not
//!   shutting down. `200 {"status":"ready","checks":{...}}`, or `503
//!   {"status":"not_ready","checks":{...}}` where each failing check carries an error in the
//!   `{"code","message"}` form of every API error. Load balancers and readiness probes point
//!   here.
//!
//! Neither needs a key, and both answer `Cache-Control: no-store`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use herald_core::bus::BusLink;
use herald_core::log::StoreError;
use herald_core::ErrorCode;
use serde_json::{json, Value};

use crate::Api;

/// The code a bus check fails with (readiness only: no request fails with it).
const BUS_UNAVAILABLE: &str = "bus_unavailable";

/// `GET /healthz`: `200 {"status":"ok"}` while the process serves and needs no restart; `503`
/// with the store's `store_halted` error once a failed fsync stopped its writes.
pub async fn healthz(State(api): State<Arc<Api>>) -> Response {
    match api.engine.store_write_fault() {
        Some(fault) if fault.needs_restart() => {
            let body = json!({ "error": store_error(&fault) });
            answer(StatusCode::SERVICE_UNAVAILABLE, body)
        }
        _ => answer(StatusCode::OK, json!({ "status": "ok" })),
    }
}

/// `GET /readyz`: whether this node takes work now, and if not, which check fails and why.
pub async fn readyz(State(api): State<Arc<Api>>) -> Response {
    let readiness = Readiness {
        store: api.engine.store_takes_writes().await,
        bus: api.bus.link(),
        draining: api.shutdown.is_cancelled(),
    };
    let (status, body) = readiness.answer();
    answer(status, body)
}

/// What `/readyz` found.
struct Readiness {
    store: Result<(), StoreError>,
    bus: BusLink,
    draining: bool,
}

impl Readiness {
    /// The status and body `/readyz` answers.
    fn answer(&self) -> (StatusCode, Value) {
        let store = match &self.store {
            Ok(()) => json!({ "status": "ok" }),
            Err(fault) => json!({ "status": "failing", "error": store_error(fault) }),
        };
        let bus = match &self.bus {
            BusLink::Local => json!({ "status": "ok", "link": "local" }),
            BusLink::Connected => json!({ "status": "ok", "link": "connected" }),
            BusLink::Disconnected { reason } => json!({
                "status": "failing",
                "link": "disconnected",
                "error": { "code": BUS_UNAVAILABLE, "message": reason },
            }),
        };
        let bus_ok = !matches!(self.bus, BusLink::Disconnected { .. });
        let ready = self.store.is_ok() && bus_ok && !self.draining;
        let (status, word) = match ready {
            true => (StatusCode::OK, "ready"),
            false => (StatusCode::SERVICE_UNAVAILABLE, "not_ready"),
        };
        let body = json!({
            "status": word,
            "checks": { "store": store, "bus": bus, "draining": self.draining },
        });
        (status, body)
    }
}

/// A store fault as an API error object, with the code a request refused by it answers
/// (without the log line that answer writes: a probe storm must not flood the log).
fn store_error(fault: &StoreError) -> Value {
    let code = match fault {
        StoreError::Unavailable { .. } => ErrorCode::StoreUnavailable,
        StoreError::Full { .. } => ErrorCode::InsufficientStorage,
        StoreError::Halted { .. } => ErrorCode::StoreHalted,
        StoreError::Closed => ErrorCode::ShuttingDown,
        StoreError::Backend { .. } => ErrorCode::StoreFailed,
    };
    json!({ "code": code.as_str(), "message": fault.chain() })
}

/// A JSON answer no cache keeps.
fn answer(status: StatusCode, body: Value) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body.to_string(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready() -> Readiness {
        Readiness {
            store: Ok(()),
            bus: BusLink::Local,
            draining: false,
        }
    }

    #[test]
    fn a_node_with_every_check_passing_is_ready() {
        let (status, body) = ready().answer();
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            body,
            json!({
                "status": "ready",
                "checks": {
                    "store": { "status": "ok" },
                    "bus": { "status": "ok", "link": "local" },
                    "draining": false,
                },
            })
        );
        let connected = Readiness {
            bus: BusLink::Connected,
            ..ready()
        };
        assert_eq!(connected.answer().1["checks"]["bus"]["link"], "connected");
    }

    #[test]
    fn a_store_that_takes_no_writes_names_itself_with_its_error() {
        let down = Readiness {
            store: Err(StoreError::Unavailable {
                context: "cannot reach PostgreSQL at db:5432/herald".into(),
                source: None,
            }),
            ..ready()
        };
        let (status, body) = down.answer();
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body["status"], "not_ready");
        let store = &body["checks"]["store"];
        assert_eq!(store["status"], "failing", "{body}");
        assert_eq!(store["error"]["code"], "store_unavailable");
        assert_eq!(
            store["error"]["message"],
            "store unavailable: cannot reach PostgreSQL at db:5432/herald"
        );
        assert_eq!(body["checks"]["bus"]["status"], "ok");
        let full = Readiness {
            store: Err(StoreError::failed("x")),
            ..ready()
        };
        assert_eq!(
            full.answer().1["checks"]["store"]["error"]["code"],
            "store_failed"
        );
    }

    #[test]
    fn a_disconnected_bus_is_not_ready() {
        let down = Readiness {
            bus: BusLink::Disconnected {
                reason: "Redis is not reachable".into(),
            },
            ..ready()
        };
        let (status, body) = down.answer();
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            body["checks"]["bus"],
            json!({
                "status": "failing",
                "link": "disconnected",
                "error": { "code": "bus_unavailable", "message": "Redis is not reachable" },
            })
        );
        assert_eq!(body["checks"]["store"]["status"], "ok");
    }

    #[test]
    fn a_draining_server_is_not_ready() {
        let draining = Readiness {
            draining: true,
            ..ready()
        };
        let (status, body) = draining.answer();
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body["status"], "not_ready");
        assert_eq!(body["checks"]["draining"], true);
    }
}
