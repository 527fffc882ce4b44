//! `GET /v1/audit?app=&action=&since=&until=&limit=&cursor=`: the audit log, newest first, a
//! page at a time. The admin key sees every entry; an app's publisher key sees the entries about
//! its own app only (naming another app answers 404, as everywhere).

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use herald_core::audit::AuditQuery;
use herald_core::tenant::AppId;
use herald_core::{ErrorCode, HeraldError};
use serde::Deserialize;
use serde_json::json;

use crate::auth::Caller;
use crate::error::ApiError;
use crate::Api;

/// Entries in a page unless `limit` says otherwise.
const DEFAULT_PAGE: usize = 100;
/// Most entries in a page.
const MAX_PAGE: usize = 1000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    #[serde(default)]
    app: Option<String>,
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    since: Option<i64>,
    #[serde(default)]
    until: Option<i64>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    cursor: Option<String>,
}

/// `GET /v1/audit`: `{"entries": [...], "next_cursor": "..." | null}`; pass `next_cursor` as
/// `cursor` for the next (older) page.
pub async fn list(
    State(api): State<Arc<Api>>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let caller = api.authorize_caller(&headers)?;
    let params: Params = crate::publish::parse_query(raw.as_deref())?;
    let named = params.app.as_deref().map(AppId::parse).transpose()?;
    let app = match (caller, named) {
        (Caller::Admin, named) => named,
        (Caller::Publisher(own), Some(named)) if named != own => {
            return Err(HeraldError::new(ErrorCode::NotFound, format!("no app {named}")).into());
        }
        (Caller::Publisher(own), _) => Some(own),
    };
    let before_id = params
        .cursor
        .as_deref()
        .map(|c| {
            c.parse::<u64>().map_err(|_| {
                HeraldError::bad_request(format!(
                    "cursor {c:?} is not one this API answered: pass next_cursor as it came"
                ))
            })
        })
        .transpose()?;
    let limit = params.limit.unwrap_or(DEFAULT_PAGE);
    if limit == 0 || limit > MAX_PAGE {
        return Err(HeraldError::bad_request(format!("limit must be 1 to {MAX_PAGE}")).into());
    }
    let entries = api
        .audit
        .audit_entries(&AuditQuery {
            app,
            action: params.action,
            since: params.since,
            until: params.until,
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
