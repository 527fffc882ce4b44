//! The steps every transport takes to start receiving: authorising a client, registering its
//! connection so revocations reach it, the per-connection subscription limit, subscribing one channel with the client's permission, and
//! opening a device's inbox (from its acknowledged cursor, or from given ones). The
//! [`ClientSession`](super::ClientSession) of a WebSocket and the query-string streams (SSE,
//! long-poll, Meteor) call these, so each rule and each error message is written once.

use std::sync::Arc;

use herald_core::auth::Client;
use herald_core::engine::{Catchup, SubscribeOutcome, SubscribeRequest};
use herald_core::hub::Subscription;
use herald_core::lifecycle::Transport;
use herald_core::live::Registration;
use herald_core::outbox::{OutFrame, Outbox};
use herald_core::presence::{member_data, Membership, PresenceLimits};
use herald_core::{ChannelName, Cursor, ErrorCode, HeraldError};
use herald_push::inbox::InboxPlan;

use crate::Edge;

/// A confirmation frame a transport queues ahead of a channel's catch-up, if it has one.
pub type Confirm<'a> = &'a (dyn Fn(&ChannelName, &SubscribeOutcome) -> Option<OutFrame> + Sync);

/// One channel (or inbox log) subscribed and live.
pub struct Opened {
    /// The channel.
    pub name: ChannelName,
    /// The registered subscription (unsubscribe it with the engine when done).
    pub subscription: Arc<Subscription>,
    /// What the subscribe found.
    pub outcome: SubscribeOutcome,
    /// The position before anything is written: just before the first replayed message, else
    /// the cursor resumed from, else where the channel stands.
    pub position: Cursor,
}

/// Authenticates a client by token, or as anonymous when there is none and that is allowed.
pub fn authorise(edge: &Edge, token: Option<&str>) -> Result<Client, HeraldError> {
    match token {
        Some(t) if !t.is_empty() => edge.tokens.verify(t),
        _ if edge.settings.allow_anonymous => Ok(Client::anonymous()),
        _ => Err(HeraldError::new(
            ErrorCode::Unauthorized,
            "a client token is required (?token=, Authorization: Bearer, or connect)",
        )),
    }
}

/// Registers the connection of `client` writing to `outbox` with this node's live clients, so
/// a revocation, a deleted app, a changed secret or a deactivated device closes it (until the
/// [`Registration`] is dropped). Checked again after registering: a token revoked, or a secret
/// changed, between verifying it and now closes the outbox at once, so no revocation slips
/// between the two. `transport` is what the connection's lifecycle events name
/// ([`herald_core::lifecycle`]).
pub fn register(
    edge: &Edge,
    client: &Client,
    outbox: &Arc<Outbox>,
    transport: Transport,
) -> Registration {
    let registration = edge.live.register(client, outbox, transport);
    if let Err(reason) = edge.tokens.still_valid(&client.app, &client.token) {
        outbox.close(reason);
    }
    registration
}

/// The connection of `client` (over `transport`), registered at `registered`, authorised
/// again (a token refresh, of the same app): its place now matches the new token, checked
/// again as [`register`] checks it. A refresh as the same client raises no lifecycle event.
pub fn refresh(
    edge: &Edge,
    registered: &mut Registration,
    client: &Client,
    outbox: &Arc<Outbox>,
    transport: Transport,
) {
    registered.refresh(client, transport);
    if let Err(reason) = edge.tokens.still_valid(&client.app, &client.token) {
        outbox.close(reason);
    }
}

/// How many subscriptions a connection asks for, as the limit's error message words it.
#[derive(Debug, Clone, Copy)]
pub enum Wanted {
    /// One more, on top of `held` (a `subscribe` command).
    OneMore {
        /// Subscriptions held now.
        held: usize,
    },
    /// All at once, named in one request.
    Named(usize),
}

/// The per-connection subscription limit (`max_subscriptions`).
pub fn check_limit(edge: &Edge, wanted: Wanted) -> Result<(), HeraldError> {
    let max = edge.settings.max_subscriptions;
    let message = match wanted {
        Wanted::OneMore { held } if held >= max => {
            format!("at most {max} subscriptions per connection")
        }
        Wanted::Named(n) if n > max => format!("{n} channels named; at most {max} per connection"),
        _ => return Ok(()),
    };
    Err(HeraldError::new(ErrorCode::TooManySubscriptions, message))
}

/// What a subscribe asks of a presence channel (nothing of any other channel).
#[derive(Debug, Clone, Copy, Default)]
pub struct PresenceAsk<'a> {
    /// Send the `members` frame after the subscribe's confirmation, then joins and leaves.
    pub frames: bool,
    /// The member data the client gave (JSON text), used when its token has no `user_info`.
    pub member: Option<&'a str>,
}

/// Subscribes `outbox` to `name` (which the client must be allowed to read), queues `confirm`'s
/// frame, the catch-up, then live messages. On a presence channel the client's user becomes a
/// member first (refused without a `sub`, over the channel's member limit, or with member data
/// too large), and, if `presence.frames`, its `members` frame follows the confirmation.
pub async fn open_channel(
    edge: &Edge,
    client: &Client,
    outbox: &Arc<Outbox>,
    name: &ChannelName,
    request: &SubscribeRequest,
    presence: &PresenceAsk<'_>,
    confirm: Confirm<'_>,
) -> Result<Opened, HeraldError> {
    client.check_subscribe(name.public())?;
    // The one branch every other channel's subscribe pays.
    let membership = match edge.engine.namespaces().presence(name.as_str()) {
        None => None,
        Some(limits) => Some(join_presence(edge, client, name, limits, presence).await?),
    };
    // A failed subscribe drops the membership, which gives it back.
    let catchup = edge.engine.subscribe(name, outbox, request).await?;
    let opened = go_live(name, catchup, request.since.as_ref(), confirm);
    if let Some(mut membership) = membership {
        if presence.frames {
            membership.watch(outbox).await;
        }
        opened.subscription.set_presence(membership);
    }
    Ok(opened)
}

/// Makes the client's user a member of the presence channel `name` (in a cluster, once the
/// cluster admitted it within the channel's member limit).
async fn join_presence(
    edge: &Edge,
    client: &Client,
    name: &ChannelName,
    limits: &PresenceLimits,
    presence: &PresenceAsk<'_>,
) -> Result<Membership, HeraldError> {
    if client.sub.is_empty() {
        return Err(HeraldError::forbidden(format!(
            "{:?} is a presence channel: subscribing needs a client token with a sub (the \
             user id its members are known by)",
            name.public()
        )));
    }
    let data = member_data(client.user_info.as_deref(), presence.member, limits)?;
    edge.engine
        .presence()
        .join(name, limits, &client.sub, data)?
        .admitted()
        .await
}

/// Subscribes `outbox` to the device's inbox logs (`$app`, then `$device`), each from its cursor
/// in `since` or else from the device's acknowledged one; `skip` leaves out logs already held.
/// Each log is handed to `keep` as soon as it is live, so an error on the second leaves the
/// first with its owner (to unsubscribe).
pub async fn open_inbox(
    edge: &Edge,
    plan: &InboxPlan,
    since: [Option<Cursor>; 2],
    outbox: &Arc<Outbox>,
    skip: impl Fn(&ChannelName) -> bool,
    confirm: Confirm<'_>,
    mut keep: impl FnMut(Opened),
) -> Result<(), HeraldError> {
    let acked = [&plan.cursor.app, &plan.cursor.device];
    for (i, since) in since.into_iter().enumerate() {
        let name = &plan.logs[i];
        if skip(name) {
            continue;
        }
        let from = since.unwrap_or_else(|| acked[i].clone());
        let catchup = edge.inbox.subscribe(plan, i, from.clone(), outbox).await?;
        keep(go_live(name, catchup, Some(&from), confirm));
    }
    Ok(())
}

fn go_live(
    name: &ChannelName,
    catchup: Catchup,
    since: Option<&Cursor>,
    confirm: Confirm<'_>,
) -> Opened {
    let outcome = catchup.outcome.clone();
    let seq = match (catchup.first_replayed(), since) {
        (Some(first), _) => first - 1,
        (None, Some(since)) if outcome.recovered => since.seq,
        (None, _) => outcome.seq,
    };
    let position = Cursor {
        epoch: outcome.epoch.clone(),
        seq,
    };
    // The hub's copy of the name, shared with every other subscriber of the channel.
    let shared = catchup.channel().clone();
    let subscription = catchup.go_live(confirm(name, &outcome));
    Opened {
        name: shared,
        subscription,
        outcome,
        position,
    }
}
