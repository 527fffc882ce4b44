//! The provider job queue as an app sees it (its own publisher key): worker statistics and
//! queue depth at `GET /v1/jobs/stats`, dead letters at `GET /v1/jobs/dead`, and
//! `POST /v1/jobs/{id}/replay` / `DELETE /v1/jobs/{id}` to retry or drop one.

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use herald_core::message::now_millis;
use herald_core::tenant::AppId;
use herald_core::{ErrorCode, HeraldError};
use herald_push::delivery::stats::ProviderFigures;
use herald_push::device::Platform;
use herald_push::jobs::{Depth, JobKind};
use serde_json::{json, Value};

use crate::audit::{self, Action};
use crate::auth::Publisher;
use crate::error::ApiError;
use crate::query::Query;
use crate::Api;

/// Worker figures and queue depth of `app`, per provider: what `GET /v1/jobs/stats` and the
/// app's stats show.
pub(crate) async fn provider_stats(api: &Api, app: &AppId) -> Result<Value, HeraldError> {
    let depth = api
        .deliverer
        .queue()
        .depth(Some(app))
        .await
        .map_err(HeraldError::from)?;
    let figures = api.deliverer.stats().figures(Some(app));
    Ok(provider_map(app, &figures, &depth, now_millis()))
}

/// The per-provider map of `app` out of the worker's `figures` and the queue's `depth` (which
/// may hold other apps' too): each provider's figures with `queued`, `dead` and
/// `oldest_age_ms` added (`expand`: the jobs that expand a broadcast into sends).
pub(crate) fn provider_map(
    app: &AppId,
    figures: &[(AppId, Platform, ProviderFigures)],
    depth: &[Depth],
    now: i64,
) -> Value {
    let mut out = serde_json::Map::new();
    for (_, provider, f) in figures.iter().filter(|(a, _, _)| a == app) {
        out.insert(provider.as_str().into(), json!(f));
    }
    for d in depth.iter().filter(|d| d.app == *app) {
        let name = d.provider.map_or("expand", |p| p.as_str());
        let entry = out.entry(name.to_string()).or_insert_with(|| json!({}));
        if let Some(map) = entry.as_object_mut() {
            map.insert("queued".into(), json!(d.queued));
            map.insert("dead".into(), json!(d.dead));
            map.insert(
                "oldest_age_ms".into(),
                json!(d.oldest_ms.map(|t| (now - t).max(0))),
            );
        }
    }
    Value::Object(out)
}

/// `GET /v1/jobs/stats`.
pub async fn stats(
    State(api): State<Arc<Api>>,
    Publisher { app, .. }: Publisher,
) -> Result<Response, ApiError> {
    let providers = provider_stats(&api, &app).await?;
    Ok(axum::Json(json!({ "app": app, "providers": providers })).into_response())
}

/// `GET /v1/jobs/dead?after=ID&limit=N`.
pub async fn dead(
    State(api): State<Arc<Api>>,
    Publisher { app, .. }: Publisher,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let q = Query::parse(raw.as_deref(), &["after", "limit"])?;
    let after = q.number("after", i64::MIN, i64::MAX)?;
    let limit = q.limit()?;
    let letters = api
        .deliverer
        .queue()
        .dead_letters(&app, after, limit)
        .await
        .map_err(HeraldError::from)?;
    let jobs: Vec<Value> = letters
        .iter()
        .map(|d| {
            let (kind, device) = match &d.job.kind {
                JobKind::Send { device } => ("send", Some(device.as_str())),
                JobKind::Expand { .. } => ("expand", None),
            };
            json!({
                "id": d.id,
                "push": d.job.push,
                "kind": kind,
                "provider": d.job.provider.map(|p| p.as_str()),
                "device": device,
                "attempts": d.attempts,
                "reason": d.reason,
                "died": d.died_ms,
            })
        })
        .collect();
    let next = (letters.len() == limit).then(|| letters.last().map(|d| d.id));
    Ok(axum::Json(json!({ "jobs": jobs, "next": next.flatten() })).into_response())
}

/// Parses a job id from the path.
pub(crate) fn parse_job_id(id: &str) -> Result<i64, HeraldError> {
    id.parse()
        .map_err(|_| HeraldError::bad_request(format!("a job id is a number, not {id:?}")))
}

fn not_dead(id: i64) -> HeraldError {
    HeraldError::new(
        ErrorCode::NotFound,
        format!("no dead letter {id} in this app"),
    )
}

/// `POST /v1/jobs/{id}/replay`: the dead letter is queued again, due now, attempts reset.
pub async fn replay(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    Publisher { app, .. }: Publisher,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    audit::note(&api, &headers, Action::JobReplay, Some(&app), Some(&id));
    let id = parse_job_id(&id)?;
    let queue = api.deliverer.queue();
    if !queue
        .replay(&app, id, now_millis())
        .await
        .map_err(HeraldError::from)?
    {
        return Err(not_dead(id).into());
    }
    api.deliverer.wake();
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(json!({ "id": id, "state": "queued" })),
    )
        .into_response())
}

/// `DELETE /v1/jobs/{id}`: drops a dead letter.
pub async fn drop_dead(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    Publisher { app, .. }: Publisher,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    audit::note(&api, &headers, Action::JobDrop, Some(&app), Some(&id));
    let id = parse_job_id(&id)?;
    if !api
        .deliverer
        .queue()
        .drop_dead(&app, id)
        .await
        .map_err(HeraldError::from)?
    {
        return Err(not_dead(id).into());
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}
