//! `GET /v1/devices/{id}/inbox`: a device's inbox as the dashboard shows it: the acknowledged
//! position in each of its two logs (the app's broadcast log and its own) against each log's
//! newest message, and its most recent pushes with their receipts (direct pushes from its own
//! log, and broadcasts whose audience reaches it from the app's log).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use herald_core::log::{LogSlice, ReadFrom};
use herald_core::message::now_millis;
use herald_core::{ErrorCode, HeraldError};
use herald_push::device::check_device_id;
use herald_push::logs::PushLogs;
use herald_push::push::PushMeta;
use herald_push::Audience;
use serde_json::{json, Value};

use crate::auth::Publisher;
use crate::error::ApiError;
use crate::Api;

/// Most recent pushes listed.
const RECENT: usize = 10;

/// Broadcasts read to find the recent ones that reach the device.
const BROADCASTS_READ: u64 = 50;

fn position(cursor: &herald_proto::cursor::Cursor, slice: &LogSlice) -> Value {
    let same_epoch = cursor.epoch == slice.state.epoch || cursor.seq == 0;
    let unacked = if same_epoch {
        slice.state.last_seq.saturating_sub(cursor.seq)
    } else {
        slice.state.last_seq
    };
    json!({
        "acked": { "epoch": cursor.epoch.as_str(), "seq": cursor.seq },
        "head": { "epoch": slice.state.epoch.as_str(), "seq": slice.state.last_seq },
        "unacked": unacked,
    })
}

/// `GET /v1/devices/{id}/inbox`.
pub async fn inbox(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    Publisher { app, .. }: Publisher,
) -> Result<Response, ApiError> {
    check_device_id(&id)?;
    let (device, cursor) = api
        .devices
        .device(&app, &id)
        .await
        .map_err(HeraldError::from)?
        .ok_or_else(|| {
            HeraldError::new(ErrorCode::NotFound, format!("no device {id:?} in this app"))
        })?;
    let direct = api
        .engine
        .read(&app.device_log(&id), ReadFrom::Tail(RECENT as u64), RECENT)
        .await?;
    let broadcasts = api
        .engine
        .read(
            &app.app_log(),
            ReadFrom::Tail(BROADCASTS_READ),
            BROADCASTS_READ as usize,
        )
        .await?;
    let reaches = |m: &herald_core::message::StoredMessage| match PushMeta::of(m) {
        Some(meta) => match &meta.audience {
            Audience::All => true,
            audience => audience.reaches_tags(device.active, &device.tags),
        },
        None => true,
    };
    let mut recent: Vec<(&str, &herald_core::message::SharedMessage)> = direct
        .messages
        .iter()
        .map(|m| ("device", m))
        .chain(
            broadcasts
                .messages
                .iter()
                .filter(|m| reaches(m))
                .map(|m| ("app", m)),
        )
        .collect();
    recent.sort_by_key(|(_, m)| std::cmp::Reverse((m.time, m.seq)));
    recent.truncate(RECENT);
    let now = now_millis();
    let mut pushes = Vec::with_capacity(recent.len());
    for (log, m) in recent {
        let Some(push) = m.client_id.as_deref() else {
            continue;
        };
        let receipt = api
            .devices
            .receipt(&app, push)
            .await
            .map_err(HeraldError::from)?
            .map(|r| r.settle(now));
        pushes.push(json!({
            "id": push,
            "log": log,
            "seq": m.seq,
            "time": m.time,
            "acked": match log {
                "device" => m.seq <= cursor.device.seq && m.epoch == cursor.device.epoch,
                _ => m.seq <= cursor.app.seq && m.epoch == cursor.app.epoch,
            },
            "receipt": receipt,
        }));
    }
    Ok(axum::Json(json!({
        "device": device.id,
        "cursor": cursor.encode(),
        "app_log": position(&cursor.app, &broadcasts),
        "device_log": position(&cursor.device, &direct),
        "recent": pushes,
    }))
    .into_response())
}
