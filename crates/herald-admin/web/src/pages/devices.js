// Devices of the app in view: find one by id, list by user or tag, register a test device;
// a device's page shows its registration, its inbox position in both logs and its recent
// pushes with their receipts.

import { currentApp, get, post } from '../api.js';
import { formValues, h, mount } from '../dom.js';
import { int, time } from '../format.js';
import { href } from '../route.js';
import { badge, busy, errorSlot, failed, kv, loading, pageHead, panel, table } from '../ui.js';

export function render(view, rest, { go }) {
  return rest ? devicePage(view, rest, { go }) : searchPage(view, { go });
}

function deviceTable(devices, go) {
  return table([
    { label: 'Id', value: (d) => h('a', { href: href(`devices/${encodeURIComponent(d.id)}`) }, d.id) },
    { label: 'Platform', value: (d) => d.platform },
    { label: 'User', value: (d) => d.user || '—' },
    { label: 'Tags', value: (d) => (d.tags.length ? d.tags.map((t) => badge(t)) : '—') },
    { label: 'State', value: (d) => (d.active ? badge('active', 'good') : badge('inactive', 'warn')) },
    { label: 'Updated', value: (d) => time(d.updated) },
  ], devices, { onRow: (d) => go(`devices/${encodeURIComponent(d.id)}`), empty: 'No devices match.' });
}

function searchPage(view, { go }) {
  const slot = errorSlot();
  const results = h('div', { id: 'device-results' }, loading());
  const byId = h('form', {
    class: 'inline-form',
    id: 'find-device-form',
    onsubmit: (e) => {
      e.preventDefault();
      const { id } = formValues(byId);
      if (id.trim()) go(`devices/${encodeURIComponent(id.trim())}`);
    },
  },
  h('input', { name: 'id', placeholder: 'device id', 'aria-label': 'Device id', required: true }),
  h('button', { type: 'submit', class: 'primary' }, 'Find'));

  const listButton = h('button', { type: 'submit', class: 'primary' }, 'List');
  const byQuery = h('form', {
    class: 'inline-form',
    id: 'list-devices-form',
    onsubmit: async (e) => {
      e.preventDefault();
      const v = formValues(byQuery);
      const q = new URLSearchParams({ limit: '100' });
      if (v.user.trim()) q.set('user', v.user.trim());
      if (v.tag.trim()) q.set('tag', v.tag.trim());
      const answer = await busy(listButton, slot, () => get(`/v1/devices?${q}`));
      if (answer) mount(results, deviceTable(answer.devices, go));
    },
  },
  h('input', { name: 'user', placeholder: 'user', 'aria-label': 'User' }),
  h('input', { name: 'tag', placeholder: 'tag', 'aria-label': 'Tag' }),
  listButton);

  const registerButton = h('button', { type: 'submit', class: 'primary', id: 'register-device' }, 'Register');
  const register = h('form', {
    class: 'inline-form',
    id: 'register-device-form',
    onsubmit: async (e) => {
      e.preventDefault();
      const v = formValues(register);
      const body = { platform: 'herald', id: v.id.trim() };
      if (v.user.trim()) body.user = v.user.trim();
      const tags = v.tags.split(',').map((t) => t.trim()).filter(Boolean);
      if (tags.length) body.tags = tags;
      const device = await busy(registerButton, slot, () => post('/v1/devices', body));
      if (device) go(`devices/${encodeURIComponent(device.id)}`);
    },
  },
  h('input', { name: 'id', placeholder: 'device id', 'aria-label': 'New device id', required: true }),
  h('input', { name: 'user', placeholder: 'user (optional)', 'aria-label': 'New device user' }),
  h('input', { name: 'tags', placeholder: 'tags, comma-separated', 'aria-label': 'New device tags' }),
  registerButton);

  mount(view,
    pageHead('Devices', `App ${currentApp()}: find a device by id, or list them by user or tag.`),
    slot.el,
    h('div', { class: 'grid-2' },
      panel('Find by id', byId),
      panel('List by user or tag', byQuery)),
    panel('Results', results),
    panel('Register a test device (Herald inbox only)', register));
  get('/v1/devices?limit=100')
    .then((answer) => mount(results, deviceTable(answer.devices, go)))
    .catch((e) => failed(results, e));
}

function position(p) {
  return `${p.acked.seq} of ${p.head.seq}` + (p.unacked ? ` (${p.unacked} not acknowledged)` : '');
}

function receiptText(r) {
  if (!r) return '—';
  return [
    `targeted ${r.targeted ?? '…'}`,
    `delivered ${r.delivered}`,
    `pending ${r.pending}`,
    `expired ${r.expired}`,
  ].join(' · ');
}

function devicePage(view, id, { go }) {
  const slot = errorSlot();
  const details = h('div', {}, loading());
  const inbox = h('div', {}, loading());
  const recent = h('div', {}, loading());
  async function load() {
    slot.clear();
    try {
      const device = await get(`/v1/devices/${encodeURIComponent(id)}`);
      mount(details, kv([
        ['Id', device.id],
        ['Platform', device.platform],
        ['User', device.user || '—'],
        ['Tags', device.tags.length ? device.tags.map((t) => badge(t)) : '—'],
        ['State', device.active ? badge('active', 'good') : [badge('inactive', 'warn'), ' ', device.inactive_reason || '']],
        ['Locale', device.locale || '—'],
        ['Registered', time(device.created)],
        ['Updated', time(device.updated)],
      ]));
      const box = await get(`/v1/devices/${encodeURIComponent(id)}/inbox`);
      mount(inbox,
        kv([
          ['Cursor', h('code', { id: 'inbox-cursor' }, box.cursor)],
          ['Broadcast log ($app)', position(box.app_log)],
          ['Own log ($device)', position(box.device_log)],
        ]));
      mount(recent,
        table([
          { label: 'Push', value: (p) => h('a', { href: href(`pushes/${encodeURIComponent(p.id)}`) }, h('code', {}, p.id)) },
          { label: 'Log', value: (p) => (p.log === 'app' ? 'broadcast' : 'direct') },
          { label: 'Seq', value: (p) => int(p.seq), class: 'num' },
          { label: 'Sent', value: (p) => time(p.time) },
          { label: 'Acked', value: (p) => (p.acked ? badge('yes', 'good') : badge('no')) },
          { label: 'Receipt', value: (p) => receiptText(p.receipt) },
        ], box.recent, { empty: 'No pushes for this device yet.' }));
    } catch (e) {
      // No card stays loading: the first one waiting shows the error, the others say they
      // were not loaded; a failed reload shows the error above the cards.
      const waiting = [details, inbox, recent].filter((el) => el.querySelector('.loading'));
      waiting.forEach((el, i) => (i === 0 ? failed(el, e) : mount(el, h('p', { class: 'muted empty' }, 'Not loaded.'))));
      if (!waiting.length) slot.show(e);
    }
  }
  mount(view,
    pageHead(`Device ${id}`, `App ${currentApp()}.`,
      h('a', { href: href('devices'), class: 'button ghost' }, 'All devices'),
      h('button', { class: 'ghost', onclick: load }, 'Reload'),
      h('button', { class: 'primary', id: 'push-to-device', onclick: () => go(`pushes/new/device/${encodeURIComponent(id)}`) }, 'Send a test push')),
    slot.el,
    h('div', { class: 'grid-2' }, panel('Registration', details), panel('Inbox', inbox)),
    panel('Recent pushes (newest first)', recent));
  load();
}
