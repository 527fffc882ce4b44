//! Pushes: `POST /v1/push` (to a device, a user, a tag expression or the whole app; answers
//! with the push id once it is stored, without waiting for delivery), `GET /v1/push/{id}`
//! (receipt counts), and `POST /v1/ack`, where a device holding a device token acknowledges
//! what it processed over SSE or long-poll (WebSocket devices send an `ack` command).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use herald_core::message::now_millis;
use herald_core::{Cursor, Epoch, ErrorCode, HeraldError};
use herald_proto::receipt::{DeviceReceipt, ProviderReceipt};
use herald_push::delivery::listing::ListedPush;
use herald_push::inbox::LogKind;
use herald_push::push::PushBody;
use serde::Deserialize;
use serde_json::json;

use crate::auth::{DeviceToken, Publisher};
use crate::body::{parse_json, read_body};
use crate::error::ApiError;
use crate::limited::{Counted, OnePush};
use crate::query::Query;
use crate::Api;

/// `POST /v1/push`.
pub async fn push(
    State(api): State<Arc<Api>>,
    Counted { app, .. }: Counted<OnePush>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let body = read_body(body, api.max_message_bytes + 8192).await?;
    let mut req: PushBody = parse_json(&body)?;
    if let Some(key) = headers.get("idempotency-key") {
        let key = key
            .to_str()
            .map_err(|_| HeraldError::bad_request("Idempotency-Key must be visible ASCII"))?;
        req.set_id(key)?;
    }
    let max = api.usage.app(&app).max_message_bytes(api.max_message_bytes);
    let push = req.validate(max, now_millis())?;
    let accepted = api.inbox.send(&app, push).await?;
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(json!({
            "id": accepted.id,
            "targeted": accepted.targeted,
            "duplicate": accepted.duplicate,
        })),
    )
        .into_response())
}

/// `GET /v1/push/{id}`: `targeted`, `delivered` (acknowledged), `pending`, `expired`, and for a
/// provider push what became of it per path (`providers`), per device with `?devices=true`
/// (`after`: devices after this id; `limit`: most devices listed, 1 to 1000, default 100).
pub async fn receipt(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    Publisher { app, .. }: Publisher,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let q = Query::parse(raw.as_deref(), &["devices", "after", "limit"])?;
    let list_devices = q.flag("devices")?.unwrap_or(false);
    let limit = q.limit()?;
    let mut receipt = api
        .devices
        .receipt(&app, &id)
        .await
        .map_err(HeraldError::from)?
        .ok_or_else(|| HeraldError::new(ErrorCode::NotFound, format!("no push {id:?}")))?
        .settle(now_millis());
    if receipt.delivery.as_deref().is_some_and(|d| d != "live") {
        let queue = api.deliverer.queue();
        let jobs = queue
            .push_jobs(&app, &id)
            .await
            .map_err(HeraldError::from)?;
        let mut paths = ProviderReceipt::default();
        for (result, n) in &jobs.done {
            paths.count_result(result, *n);
        }
        paths.queued = jobs.queued;
        paths.dead = jobs.dead;
        paths.in_doubt = jobs.in_doubt;
        paths.expanding = jobs.expanding;
        receipt.providers = Some(paths);
        if list_devices {
            let listed = ListedPush {
                app: &app,
                push: &id,
                created_ms: receipt.created,
                expanding: jobs.expanding,
            };
            let devices = api
                .deliverer
                .device_listing(listed, q.text("after"), limit)
                .await
                .map_err(HeraldError::from)?;
            receipt.devices = Some(
                devices
                    .into_iter()
                    .map(|d| DeviceReceipt {
                        device: d.device,
                        provider: d.provider.as_str().to_string(),
                        state: d.state,
                        result: d.result,
                        attempts: d.attempts,
                        in_doubt: d.in_doubt,
                    })
                    .collect(),
            );
        }
    }
    Ok(axum::Json(receipt).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AckBody {
    #[serde(default)]
    channel: Option<String>,
    #[serde(default)]
    seq: Option<u64>,
    #[serde(default)]
    epoch: Option<String>,
    #[serde(default)]
    cursor: Option<String>,
}

/// `POST /v1/ack` with a device token: `{"channel":"$app","seq":N}` (one log), or
/// `{"cursor":"EPOCH:SEQ,EPOCH:SEQ"}` (the cursor an inbox stream reports, `$app` first).
/// Answers with the device's cursor after the ack.
pub async fn ack(
    State(api): State<Arc<Api>>,
    DeviceToken { app, device }: DeviceToken,
    body: Body,
) -> Result<Response, ApiError> {
    let body = read_body(body, 4096).await?;
    let req: AckBody = parse_json(&body)?;
    let acks: Vec<(LogKind, Cursor)> = match (req.cursor, req.channel, req.seq) {
        (Some(cursor), None, None) => {
            let positions = herald_proto::cursor::decode(&cursor, 2)?;
            [LogKind::App, LogKind::Device]
                .into_iter()
                .zip(positions)
                .filter_map(|(k, c)| c.map(|c| (k, c)))
                .collect()
        }
        (None, Some(channel), Some(seq)) => vec![(
            LogKind::parse(&channel)?,
            Cursor {
                epoch: Epoch::new(req.epoch.as_deref().unwrap_or("")),
                seq,
            },
        )],
        _ => {
            return Err(HeraldError::bad_request(
                "send {\"channel\":\"$app\"|\"$device\",\"seq\":N} or {\"cursor\":\"...\"}",
            )
            .into())
        }
    };
    if acks.is_empty() {
        return Err(HeraldError::bad_request("the cursor names no position to acknowledge").into());
    }
    let mut cursor = None;
    for (kind, upto) in acks {
        cursor = Some(api.inbox.ack(&app, &device, kind, upto).await?);
    }
    let cursor = cursor.unwrap_or_default();
    Ok(axum::Json(json!({
        "cursor": cursor.encode(),
        "app": { "epoch": cursor.app.epoch.as_str(), "seq": cursor.app.seq },
        "device": { "epoch": cursor.device.epoch.as_str(), "seq": cursor.device.seq },
    }))
    .into_response())
}
