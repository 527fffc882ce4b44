//! `GET /v1/audit?app=&action=&since=&until=&limit=&cursor=`: the audit log, newest first, a
//! page at a time. The admin key sees every entry; an app's publisher key sees the entries about
//! its own app only (naming another app answers 404, as everywhere).

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use herald_core::audit::AuditQuery;
use herald_core::tenant::AppId;
use herald_core::{ErrorCode, HeraldError};
use serde_json::json;

use crate::auth::Caller;
use crate::error::ApiError;
use crate::query::Query;
use crate::Api;

/// `GET /v1/audit`: `{"entries": [...], "next_cursor": "..." | null}`; pass `next_cursor` as
/// `cursor` for the next (older) page.
pub async fn list(
    State(api): State<Arc<Api>>,
    caller: Caller,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let params = Query::parse(
        raw.as_deref(),
        &["app", "action", "since", "until", "limit", "cursor"],
    )?;
    let since = params.number("since", i64::MIN, i64::MAX)?;
    let until = params.number("until", i64::MIN, i64::MAX)?;
    let limit = params.limit()?;
    let named = params.text("app").map(AppId::parse).transpose()?;
    let app = match (caller, named) {
        (Caller::Admin, named) => named,
        (Caller::Publisher(own), Some(named)) if named != own => {
            return Err(HeraldError::new(ErrorCode::NotFound, format!("no app {named}")).into());
        }
        (Caller::Publisher(own), _) => Some(own),
    };
    let before_id = params
        .text("cursor")
        .map(|c| {
            c.parse::<u64>().map_err(|_| {
                HeraldError::bad_request(format!(
                    "cursor {c:?} is not one this API answered: pass next_cursor as it came"
                ))
            })
        })
        .transpose()?;
    let entries = api
        .audit
        .audit_entries(&AuditQuery {
            app,
            action: params.text("action").map(str::to_owned),
            since,
            until,
            before_id,
            limit,
        })
        .await
        .map_err(HeraldError::from)?;
    let next_cursor = (entries.len() == limit)
        .then(|| entries.last().map(|e| e.id.to_string()))
        .flatten();
    Ok(axum::Json(json!({ "entries": entries, "next_cursor": next_cursor })).into_response())
}
