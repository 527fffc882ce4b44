// Herald's exact resume for pusher-js (docs/pusher.md, "Exact resume after a reconnect"): call
// heraldResume(pusher) once, right after `new Pusher(...)`. It keeps each subscribed channel's
// position (the `pusher_internal:herald_position` frames Herald sends a subscription that asks
// for them; pusher-js shows them to no channel listener) and adds it to the `pusher:subscribe`
// pusher-js sends again after a reconnect, so Herald replays exactly what the channel missed
// before its live events. A first subscribe asks for positions only. A position that could
// not be resumed is told to the channel's listeners as `herald:resume_failed` (refetch what
// you show from your backend). Against a Pusher server the extra fields are ignored.
// Returns the positions, a Map of channel name -> {epoch, seq}.
export function heraldResume(pusher) {
  const positions = new Map();
  const send = pusher.send_event.bind(pusher);
  pusher.send_event = (event, data, channel) => {
    if (event === 'pusher:subscribe') {
      const since = positions.get(data.channel);
      data = since ? { ...data, herald_since: since } : { ...data, herald_positions: true };
    } else if (event === 'pusher:unsubscribe') {
      positions.delete(data.channel);
    }
    return send(event, data, channel);
  };
  pusher.connection.bind('message', (message) => {
    if (message.event === 'pusher_internal:herald_position') {
      positions.set(message.channel, message.data);
    }
  });
  return positions;
}
