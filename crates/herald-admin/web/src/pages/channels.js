// Channels of the app in view: the list (newest seq, live subscribers), and a channel's page
// with its state, its history, and a form that publishes a test message to it. The channel's
// page is live: while the tab is visible it reads the channel's state and newest messages every
// POLL_MS, so messages published anywhere and subscribers coming and going show up by themselves.

import { channelPath, currentApp, get, post } from '../api.js';
import { formValues, h, mount } from '../dom.js';
import { int, json, time } from '../format.js';
import { href } from '../route.js';
import { busy, errorSlot, failed, loading, pageHead, panel, parseUserJson, table } from '../ui.js';

/** How often the channel's page reads the channel while the tab is visible. */
const POLL_MS = 2000;

export function render(view, rest, { go }) {
  return rest ? channelPage(view, rest, { go }) : listPage(view, { go });
}

function listPage(view, { go }) {
  const slot = errorSlot();
  const list = h('div', {}, loading());
  const open = h('form', {
    class: 'inline-form',
    id: 'open-channel-form',
    onsubmit: (e) => {
      e.preventDefault();
      const { name } = formValues(open);
      if (name.trim()) go(`channels/${name.trim()}`);
    },
  },
  h('input', { name: 'name', placeholder: 'channel name, e.g. news or chat/room-1', 'aria-label': 'Channel name', required: true }),
  h('button', { type: 'submit', class: 'primary' }, 'Open'));

  async function load() {
    try {
      const answer = await get('/v1/channels?limit=200');
      mount(list, table([
        { label: 'Channel', value: (c) => h('a', { href: href(`channels/${c.channel}`) }, c.channel) },
        { label: 'Epoch', value: (c) => h('code', {}, c.epoch || '—') },
        { label: 'Newest seq', value: (c) => int(c.seq), class: 'num' },
        { label: 'Oldest kept', value: (c) => int(c.first_seq), class: 'num' },
        { label: 'Subscribers', value: (c) => int(c.subscribers), class: 'num' },
      ], answer.channels, {
        onRow: (c) => go(`channels/${c.channel}`),
        empty: 'No channel has had a message yet. Open one by name to publish the first.',
      }), answer.next ? h('p', { class: 'muted' }, 'Showing the first 200 channels.') : null);
    } catch (e) {
      failed(list, e);
    }
  }
  mount(view,
    pageHead('Channels', `App ${currentApp()}: channels that have had a message, in name order.`),
    slot.el,
    panel('Open a channel', open),
    panel('Channels', list));
  load();
}

function stat(label, value, id) {
  return h('div', { class: 'stat' }, h('div', { class: 'tile-label' }, label), h('div', { class: 'stat-value', id }, value));
}

function channelPage(view, name) {
  const slot = errorSlot();
  const state = h('div', {}, loading());
  const history = h('div');
  const result = h('div');
  const updated = h('span', { class: 'muted', id: 'channel-updated' }, 'reading…');
  const button = h('button', { type: 'submit', class: 'primary', id: 'publish-button' }, 'Publish');
  const form = h('form', {
    class: 'stack-form',
    id: 'publish-form',
    onsubmit: async (e) => {
      e.preventDefault();
      const v = formValues(form);
      const answer = await busy(button, slot, async () => {
        const data = parseUserJson(v.data, 'The message');
        return post(`/v1/channels/${channelPath(name)}/messages`, { data });
      });
      if (answer) {
        mount(result, h('p', { class: 'ok', id: 'publish-result' },
          `Stored as seq ${answer.seq} (epoch ${answer.epoch}).`));
        refresh();
      }
    },
  },
  h('label', { for: 'message-data' }, 'Test message (JSON)'),
  h('textarea', { id: 'message-data', name: 'data', rows: 4, spellcheck: 'false' },
    JSON.stringify({ text: 'hello from the dashboard' })),
  h('div', { class: 'form-row' }, button, result));

  let loaded = false;
  /** What the history table shows: redrawn only when the channel's log moved. */
  let shownLog = null;
  let timer = null;
  let stopped = false;
  let reading = false;

  async function load() {
    const path = channelPath(name);
    const [info, page] = await Promise.all([
      get(`/v1/channels/${path}`),
      get(`/v1/channels/${path}/messages?last=50&limit=50`),
    ]);
    if (stopped) return;
    mount(state, h('div', { class: 'stats-row' },
      stat('Newest seq', int(info.seq), 'channel-seq'),
      stat('Oldest kept', int(info.first_seq)),
      stat('Subscribers', int(info.subscribers), 'channel-subscribers'),
      stat('Epoch', info.epoch || '—')));
    const log = `${info.epoch}:${info.first_seq}:${info.seq}`;
    if (log !== shownLog) {
      shownLog = log;
      const messages = (page.messages || []).slice().reverse();
      mount(history, table([
        { label: 'Seq', value: (m) => int(m.seq), class: 'num' },
        { label: 'Time', value: (m) => time(m.time) },
        { label: 'Id', value: (m) => (m.id ? h('code', {}, m.id) : '—') },
        { label: 'Data', value: (m) => h('pre', { class: 'data' }, json(m.data)) },
      ], messages, { empty: 'No messages kept for this channel.', rowAttrs: (m) => ({ 'data-seq': m.seq }) }));
    }
    loaded = true;
  }

  /** Reads the channel now (unless a read is under way) and shows what it found or why not. */
  async function refresh() {
    if (reading || stopped) return;
    reading = true;
    try {
      await load();
      if (stopped) return;
      slot.clear();
      updated.textContent = `live · updated ${new Date().toLocaleTimeString('en-GB')}`;
    } catch (e) {
      if (stopped) return;
      if (loaded) {
        slot.show(e);
        updated.textContent = 'live · the last reading failed';
      } else {
        failed(state, e);
        updated.textContent = 'not loaded';
      }
    } finally {
      reading = false;
    }
  }

  /** Reads every POLL_MS while the tab is visible; a hidden tab reads nothing. */
  function tick() {
    timer = setTimeout(async () => {
      if (document.visibilityState === 'visible') await refresh();
      if (!stopped) tick();
    }, POLL_MS);
  }

  function onVisibility() {
    if (document.visibilityState === 'visible') refresh();
  }

  mount(view,
    pageHead(`Channel ${name}`, `App ${currentApp()}.`,
      updated,
      h('a', { href: href('channels'), class: 'button ghost' }, 'All channels'),
      h('button', { class: 'ghost', id: 'reload-history', onclick: refresh }, 'Reload')),
    slot.el,
    state,
    panel('Publish a test message', form),
    panel('History (newest first, up to 50)', history));
  document.addEventListener('visibilitychange', onVisibility);
  refresh();
  tick();
  return () => {
    stopped = true;
    clearTimeout(timer);
    document.removeEventListener('visibilitychange', onVisibility);
  };
}
