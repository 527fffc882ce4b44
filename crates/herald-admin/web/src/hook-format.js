// Webhook endpoint formats as the dashboard shows them: `standard` (Herald's events) and
// `pusher` (Pusher's webhooks, docs/pusher.md section 9), and the Herald event types a `pusher`
// endpoint takes, each with the name Pusher's webhook gives it.

import { h } from './dom.js';
import { badge } from './ui.js';

/** The types a `pusher` endpoint may ask for, and Pusher's name of each (docs/pusher.md, 9). */
export const PUSHER_EVENTS = {
  'channel.occupied': 'channel_occupied',
  'channel.vacated': 'channel_vacated',
  'presence.member_added': 'member_added',
  'presence.member_removed': 'member_removed',
  'pusher.client_event': 'client_event',
  'pusher.cache_miss': 'cache_miss',
  subscription_count: 'subscription_count',
};

/** Of the types the server lists, those a `pusher` endpoint takes, in the server's order. */
export function pusherTypes(types) {
  return types.filter((t) => Object.hasOwn(PUSHER_EVENTS, t));
}

/** A type as a `pusher` endpoint's form shows it: Herald's name, then Pusher's if another. */
export function pusherEventLabel(type) {
  const pusher = PUSHER_EVENTS[type];
  return h('span', {}, h('code', {}, type), pusher !== type ? h('span', { class: 'muted' }, ` (${pusher})`) : null);
}

/** An endpoint's format (`standard` when the server says none). */
export function formatBadge(format) {
  const name = format || 'standard';
  return h('span', { 'data-format': name }, badge(name, name === 'pusher' ? 'pusher' : ''));
}
