//! Reading channels: `GET /v1/channels/{name}/messages` (history), `GET /v1/channels/{name}`
//! (state and subscribers), `GET /v1/channels/{name}/presence` (a presence channel's members)
//! and `GET /v1/channels` (list, paged by name).

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use herald_core::log::{ChannelState, ReadFrom};
use herald_core::tenant::AppId;
use herald_core::HeraldError;
use serde::Serialize;

use crate::auth::Publisher;
use crate::error::ApiError;
use crate::query::Query;
use crate::Api;

/// Splits `{name}` or `{name}/messages` out of a `/v1/channels/...` path.
pub fn split_path(path: &str) -> (&str, bool) {
    match path.strip_suffix("/messages") {
        Some(name) => (name, true),
        None => (path, false),
    }
}

/// The largest `since` and `last` (a seq is an int64 in the documented API).
const MAX_SEQ: u64 = i64::MAX as u64;

#[derive(Serialize)]
struct ChannelInfo<'a> {
    channel: &'a str,
    epoch: &'a str,
    seq: u64,
    first_seq: u64,
    subscribers: usize,
}

fn info<'a>(api: &Api, s: &'a ChannelState) -> ChannelInfo<'a> {
    ChannelInfo {
        channel: s.name.public(),
        epoch: s.epoch.as_str(),
        seq: s.last_seq,
        first_seq: s.first_seq,
        subscribers: api.engine.subscriber_count(&s.name),
    }
}

/// `GET /v1/channels/{name}` and `GET /v1/channels/{name}/messages`.
pub async fn get_path(
    State(api): State<Arc<Api>>,
    Path(path): Path<String>,
    Publisher { app, .. }: Publisher,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    if let Some(name) = path.strip_suffix("/presence") {
        return presence(&api, &app, name).await;
    }
    let (name, messages) = split_path(&path);
    let channel = app.parse_channel(name)?;
    if !messages {
        let state = api.engine.state(&channel).await?;
        let mut answer = info(&api, &state);
        if let Some(presence) = &api.presence {
            if let Some(n) = presence.subscribers(&state.name).await {
                answer.subscribers = n as usize;
            }
        }
        return Ok(axum::Json(answer).into_response());
    }
    let query = Query::parse(raw.as_deref(), &["since", "last", "limit"])?;
    let limit = query.limit()?;
    let since = query.number("since", 0, MAX_SEQ)?;
    let last = query.number("last", 0, MAX_SEQ)?;
    let from = match (since, last) {
        (Some(_), Some(_)) => {
            return Err(HeraldError::bad_request("give since or last, not both").into())
        }
        (_, Some(n)) => ReadFrom::Tail(n),
        (since, None) => ReadFrom::After(since.unwrap_or(0)),
    };
    let slice = api.engine.read(&channel, from, limit).await?;
    let body = herald_core::frames::history(&slice, true);
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response())
}

/// `GET /v1/channels/{name}/presence`: the members of a presence channel (the cluster's in a
/// cluster), in the order they joined; `not_found` for a channel outside every presence
/// namespace.
async fn presence(api: &Api, app: &AppId, name: &str) -> Result<Response, ApiError> {
    use herald_proto::reply::{ChannelPresence, PresenceMember};
    use serde_json::value::RawValue;
    let channel = app.parse_channel(name)?;
    if api.engine.namespaces().presence(channel.as_str()).is_none() {
        return Err(HeraldError::new(
            herald_core::ErrorCode::NotFound,
            format!(
                "{:?} is not a presence channel: no namespace with presence = true covers it",
                channel.public()
            ),
        )
        .into());
    }
    let members = api.engine.presence().listed(&channel).await;
    let members: Vec<PresenceMember> = members
        .iter()
        .map(|m| PresenceMember {
            user: m.user.as_ref().into(),
            // Checked JSON object text (herald_core::presence::member_data).
            data: RawValue::from_string(m.data.to_string())
                .unwrap_or_else(|_| RawValue::from_string("{}".into()).expect("valid JSON")),
        })
        .collect();
    let answer = ChannelPresence {
        channel: channel.public().into(),
        count: members.len(),
        members,
    };
    Ok(axum::Json(answer).into_response())
}

/// `GET /v1/channels?prefix=P&after=NAME&limit=N`.
pub async fn list(
    State(api): State<Arc<Api>>,
    Publisher { app, .. }: Publisher,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let query = Query::parse(raw.as_deref(), &["prefix", "after", "limit"])?;
    let limit = query.limit()?;
    let after = query.text("after");
    let prefix = query.text("prefix").unwrap_or("");
    let states = app_channels(&api, &app, prefix, after, limit).await?;
    let next = (states.len() == limit).then(|| states.last().map(|s| s.name.to_string()));
    let channels: Vec<_> = states.iter().map(|s| info(&api, s)).collect();
    Ok(
        axum::Json(serde_json::json!({ "channels": channels, "next": next.flatten() }))
            .into_response(),
    )
}

/// Up to `limit` of `app`'s own channels whose name starts with `wanted`, in name order after
/// `after` (names as the app sees them). The log lists every app's channels in one order: an
/// app's scoped names are contiguous (they share the `app~` prefix), and so are the names that
/// share a prefix; the default app's plain names are not, so its pages skip other apps' names.
async fn app_channels(
    api: &Api,
    app: &AppId,
    wanted: &str,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<ChannelState>, HeraldError> {
    let prefix = format!("{}{wanted}", app.scope_prefix());
    // The log lists names after its cursor: start just before the prefix (its last character
    // dropped), or after `after` when that is further on.
    let before_prefix = &prefix[..prefix.char_indices().last().map_or(0, |(i, _)| i)];
    let after = after.map(|a| format!("{}{a}", app.scope_prefix()));
    let mut cursor = match after {
        Some(a) if a.as_str() > before_prefix => a,
        _ => before_prefix.to_string(),
    };
    let mut out = Vec::new();
    loop {
        let from = (!cursor.is_empty()).then_some(cursor.as_str());
        let page = api.engine.list(from, limit).await?;
        let full = page.len() == limit;
        let Some(last) = page.last() else {
            return Ok(out);
        };
        cursor = last.name.as_str().to_string();
        let mut past_scope = false;
        for s in page {
            let name = s.name.as_str();
            if name < prefix.as_str() {
                continue; // between the cursor and the prefix
            }
            if !name.starts_with(&prefix) {
                past_scope = true;
                break;
            }
            if app.owns_plain_channel(s.name.as_str()) {
                out.push(s);
            }
        }
        if out.len() >= limit {
            out.truncate(limit);
            return Ok(out);
        }
        if past_scope || !full {
            return Ok(out);
        }
    }
}
