//! Devices of the key's app: `POST /v1/devices` (register or update, idempotent),
//! `POST /v1/devices/batch` (up to 1,000 per request, for imports), `GET/PATCH/DELETE
//! /v1/devices/{id}`, explicit `POST /v1/devices/{id}/activate` and `/deactivate`, and
//! `GET /v1/devices?user=&tag=&after=&limit=` (paged by id).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use herald_core::limits::AppAction;
use herald_core::tenant::AppId;
use herald_core::{ErrorCode, HeraldError};
use herald_push::device::{check_device_id, Device, DevicePatch, DeviceWrite, Registration};
use herald_push::logs::PushLogs;
use herald_push::registry::{Ack, DeviceQuery};
use serde::Deserialize;
use serde_json::json;

use crate::audit::{self, Action};
use crate::auth::Publisher;
use crate::body::{parse_json, read_body};
use crate::error::ApiError;
use crate::limited::{Counted, OneRegistration};
use crate::query::Query;
use crate::Api;

/// Most devices one batch registration holds.
pub const MAX_DEVICE_BATCH: usize = 1000;

fn not_found(id: &str) -> HeraldError {
    HeraldError::new(ErrorCode::NotFound, format!("no device {id:?} in this app"))
}

/// Stores devices, within the app's `max_devices`.
async fn upsert(
    api: &Api,
    app: &AppId,
    devices: Vec<DeviceWrite>,
) -> Result<Vec<(Device, bool)>, HeraldError> {
    crate::destinations::check_devices(api, &devices).await?;
    let usage = api.usage.app(app);
    if usage.check_devices(devices.len() as u64).is_err() {
        // Near the limit: count only the devices that are new.
        let mut new = 0;
        for d in &devices {
            if api
                .devices
                .device(app, &d.device.id)
                .await
                .map_err(HeraldError::from)?
                .is_none()
            {
                new += 1;
            }
        }
        usage.check_devices(new)?;
    }
    let start = api.inbox.start_cursor(app).await?;
    let stored = api
        .devices
        .upsert_devices(app, devices, start)
        .await
        .map_err(HeraldError::from)?;
    usage.devices_changed(
        stored.iter().filter(|(_, created)| *created).count() as u64,
        0,
    );
    // Stored: the devices created are told (webhooks' `device.registered`).
    api.inbox.devices_registered(app, &stored);
    Ok(stored)
}

/// `POST /v1/devices`: registers a device or updates it in place; 201 when created, 200 when
/// it existed.
pub async fn register(
    State(api): State<Arc<Api>>,
    Counted { app, .. }: Counted<OneRegistration>,
    body: Body,
) -> Result<Response, ApiError> {
    let body = read_body(body, 64 * 1024).await?;
    let reg: Registration = parse_json(&body)?;
    let device = reg.into_write()?;
    let (device, created) = upsert(&api, &app, vec![device])
        .await?
        .pop()
        .ok_or_else(|| HeraldError::new(ErrorCode::Internal, "nothing was stored"))?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, axum::Json(device)).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Batch {
    devices: Vec<Registration>,
}

/// `POST /v1/devices/batch` `{"devices":[...]}`: all valid or none stored; one transaction.
pub async fn register_batch(
    State(api): State<Arc<Api>>,
    publisher: Publisher,
    body: Body,
) -> Result<Response, ApiError> {
    let body = read_body(body, 16 << 20).await?;
    let batch: Batch = parse_json(&body)?;
    if batch.devices.is_empty() || batch.devices.len() > MAX_DEVICE_BATCH {
        return Err(HeraldError::bad_request(format!(
            "a batch holds 1 to {MAX_DEVICE_BATCH} devices; this one has {}",
            batch.devices.len()
        ))
        .into());
    }
    publisher.count(&api, AppAction::Registration, batch.devices.len())?;
    let app = publisher.app;
    let mut devices = Vec::with_capacity(batch.devices.len());
    for (i, reg) in batch.devices.into_iter().enumerate() {
        devices.push(
            reg.into_write()
                .map_err(|e| HeraldError::new(e.code, format!("devices[{i}]: {}", e.message)))?,
        );
    }
    let stored = upsert(&api, &app, devices).await?;
    let created = stored.iter().filter(|(_, c)| *c).count();
    let ids: Vec<&str> = stored.iter().map(|(d, _)| d.id.as_str()).collect();
    Ok(axum::Json(json!({
        "created": created,
        "updated": stored.len() - created,
        "ids": ids,
    }))
    .into_response())
}

async fn load(api: &Api, app: &AppId, id: &str) -> Result<Device, HeraldError> {
    check_device_id(id)?;
    api.devices
        .device(app, id)
        .await
        .map_err(HeraldError::from)?
        .map(|(d, _)| d)
        .ok_or_else(|| not_found(id))
}

/// `GET /v1/devices/{id}`.
pub async fn get(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    Publisher { app, .. }: Publisher,
) -> Result<Response, ApiError> {
    Ok(axum::Json(load(&api, &app, &id).await?).into_response())
}

async fn update(
    api: &Api,
    app: &AppId,
    id: &str,
    patch: DevicePatch,
) -> Result<Device, HeraldError> {
    check_device_id(id)?;
    let (mut device, cursor) = api
        .devices
        .device(app, id)
        .await
        .map_err(HeraldError::from)?
        .ok_or_else(|| not_found(id))?;
    let was_active = device.active;
    patch.apply(&mut device)?;
    let write = DeviceWrite {
        device,
        set_active: true,
    };
    let (device, _) = upsert(api, app, vec![write])
        .await?
        .pop()
        .ok_or_else(|| HeraldError::new(ErrorCode::Internal, "nothing was stored"))?;
    if was_active && !device.active {
        disconnect_device(api, app, id);
    }
    if device.active && !was_active {
        // Activation starts the device afresh: what was pushed while it was inactive, or
        // still pending when it was deactivated, is not delivered.
        let mut to = api.inbox.start_cursor(app).await?;
        let own = api.engine.state(&app.device_log(id)).await?;
        to.device = herald_core::Cursor {
            epoch: own.epoch,
            seq: own.last_seq,
        };
        let ack = Ack {
            from: cursor,
            to,
            pushes: Vec::new(),
        };
        api.devices
            .ack(app, id, &ack)
            .await
            .map_err(HeraldError::from)?;
    }
    Ok(device)
}

/// `PATCH /v1/devices/{id}`: `user`, `tags`, `add_tags`, `remove_tags`, `locale`, `active`.
/// A connected device sees tag changes when it reconnects.
pub async fn patch(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    Counted { app, .. }: Counted<OneRegistration>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let body = read_body(body, 64 * 1024).await?;
    let patch: DevicePatch = parse_json(&body)?;
    if let Some(active) = patch.active {
        audit::note(&api, &headers, device_action(active), Some(&app), Some(&id));
    }
    Ok(axum::Json(update(&api, &app, &id, patch).await?).into_response())
}

/// The audit action of setting a device's `active`.
fn device_action(active: bool) -> Action {
    if active {
        Action::DeviceActivate
    } else {
        Action::DeviceDeactivate
    }
}

/// `POST /v1/devices/{id}/activate`.
pub async fn activate(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    Counted { app, .. }: Counted<OneRegistration>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    set_active(&api, &app, &headers, &id, true).await
}

/// `POST /v1/devices/{id}/deactivate`: no push reaches it until it is activated again.
pub async fn deactivate(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    Counted { app, .. }: Counted<OneRegistration>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    set_active(&api, &app, &headers, &id, false).await
}

async fn set_active(
    api: &Api,
    app: &AppId,
    headers: &HeaderMap,
    id: &str,
    active: bool,
) -> Result<Response, ApiError> {
    audit::note(api, headers, device_action(active), Some(app), Some(id));
    let patch = DevicePatch {
        active: Some(active),
        ..DevicePatch::default()
    };
    Ok(axum::Json(update(api, app, id, patch).await?).into_response())
}

/// `DELETE /v1/devices/{id}`.
pub async fn delete(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    Publisher { app, .. }: Publisher,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    audit::note(&api, &headers, Action::DeviceDelete, Some(&app), Some(&id));
    check_device_id(&id)?;
    let head = api.engine.state(&app.device_log(&id)).await?;
    let head = herald_core::Cursor {
        epoch: head.epoch,
        seq: head.last_seq,
    };
    if !api
        .devices
        .delete_device(&app, &id, head)
        .await
        .map_err(HeraldError::from)?
    {
        return Err(not_found(&id).into());
    }
    api.usage.app(&app).devices_changed(0, 1);
    disconnect_device(&api, &app, &id);
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Closes, on every node, the connections of a device just deactivated or deleted (those whose
/// token names it), with a `disconnect` saying so.
fn disconnect_device(api: &Api, app: &AppId, id: &str) {
    api.bus
        .publish(herald_core::caches::CacheEvent::Disconnect {
            app: app.clone(),
            target: herald_core::live::Target::Device(id.to_owned()),
            reason: herald_core::outbox::CloseReason::DeviceRevoked,
        });
}

/// `GET /v1/devices?user=U&tag=T&after=ID&limit=N` (user and tag are exclusive).
pub async fn list(
    State(api): State<Arc<Api>>,
    Publisher { app, .. }: Publisher,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let query = Query::parse(raw.as_deref(), &["user", "tag", "after", "limit"])?;
    let q = DeviceQuery {
        user: query.text("user").map(str::to_owned),
        tag: query.text("tag").map(str::to_owned),
        after: query.text("after").map(str::to_owned),
        limit: query.limit()?,
        ..DeviceQuery::default()
    };
    if let Some(tag) = &q.tag {
        herald_push::tags::validate_tag(tag)?;
    }
    if q.user.is_some() && q.tag.is_some() {
        return Err(HeraldError::bad_request("list by user or by tag, not both").into());
    }
    let devices = api
        .devices
        .devices(&app, &q)
        .await
        .map_err(HeraldError::from)?;
    let next = (devices.len() == q.limit).then(|| devices.last().map(|d| d.id.clone()));
    Ok(axum::Json(json!({ "devices": devices, "next": next.flatten() })).into_response())
}
