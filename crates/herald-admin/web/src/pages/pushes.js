// Pushes: send a test push to a device, a user, a tag expression or the whole app, then watch
// its receipt (targeted, delivered, pending, expired, and the provider path per state) change
// live. `#/pushes/<id>` watches any push's receipt; `#/pushes/new/device/<id>` prefills the
// target.

import { currentApp, get, post } from '../api.js';
import { formValues, h, mount } from '../dom.js';
import { int, time } from '../format.js';
import { providerPath } from '../providers.js';
import { href } from '../route.js';
import { badge, busy, errorSlot, failed, kv, loading, pageHead, panel, parseUserJson } from '../ui.js';

const POLL_MS = 1000;

/** Pushes sent from this page in this browser tab, newest first. */
const sent = [];

/** The form as last sent, to show again while its receipt is watched. */
let lastForm = null;

export function render(view, rest, { go }) {
  const parts = rest ? rest.split('/') : [];
  let prefill = lastForm || { kind: 'device', value: '' };
  let watching = null;
  if (parts[0] === 'new' && parts.length >= 3) {
    prefill = { kind: parts[1], value: parts.slice(2).join('/') };
  } else if (parts[0]) {
    watching = rest;
  }
  const slot = errorSlot();
  const receiptView = h('div', { id: 'receipt' });
  const history = h('div');

  const valueInput = h('input', { name: 'value', id: 'push-target', value: prefill.value, 'aria-label': 'Target', placeholder: 'device id' });
  const kindSelect = h('select', {
    name: 'kind',
    id: 'push-kind',
    'aria-label': 'Target kind',
    onchange: () => {
      const kind = kindSelect.value;
      valueInput.disabled = kind === 'app';
      valueInput.placeholder = { device: 'device id', user: 'user id', tags: 'tag expression, e.g. sports AND NOT muted', app: 'every device of the app' }[kind];
    },
  }, [['device', 'Device'], ['user', 'User'], ['tags', 'Tags'], ['app', 'Whole app']].map(([v, l]) =>
    h('option', { value: v, selected: v === prefill.kind }, l)));
  const button = h('button', { type: 'submit', class: 'primary', id: 'send-push' }, 'Send push');
  const form = h('form', {
    class: 'stack-form',
    id: 'push-form',
    onsubmit: async (e) => {
      e.preventDefault();
      const v = formValues(form);
      const answer = await busy(button, slot, async () => {
        const target = v.kind === 'app' ? { app: true } : { [v.kind]: (v.value || '').trim() };
        const body = { target, data: parseUserJson(v.data, 'The data') };
        if (v.title.trim() || v.body.trim()) {
          body.notification = {};
          if (v.title.trim()) body.notification.title = v.title.trim();
          if (v.body.trim()) body.notification.body = v.body.trim();
        }
        return post('/v1/push', body);
      });
      if (answer) {
        lastForm = { kind: v.kind, value: v.value || '' };
        sent.unshift({ id: answer.id, target: v.kind === 'app' ? 'whole app' : `${v.kind} ${v.value}`, at: Date.now(), app: currentApp() });
        go(`pushes/${encodeURIComponent(answer.id)}`);
      }
    },
  },
  h('div', { class: 'form-row' }, h('label', {}, 'Target'), kindSelect, valueInput),
  h('label', { for: 'push-data' }, 'Data (JSON, delivered to the device inbox)'),
  h('textarea', { id: 'push-data', name: 'data', rows: 3, spellcheck: 'false' }, JSON.stringify({ test: true, from: 'dashboard' })),
  h('div', { class: 'form-row' },
    h('input', { name: 'title', placeholder: 'notification title (optional: goes through APNs, FCM or Web Push)', 'aria-label': 'Notification title' }),
    h('input', { name: 'body', placeholder: 'notification body (optional)', 'aria-label': 'Notification body' })),
  h('div', { class: 'form-row' }, button));
  kindSelect.dispatchEvent(new Event('change'));

  const lookup = h('form', {
    class: 'inline-form',
    id: 'lookup-push-form',
    onsubmit: (e) => {
      e.preventDefault();
      const { id } = formValues(lookup);
      if (id.trim()) go(`pushes/${encodeURIComponent(id.trim())}`);
    },
  },
  h('input', { name: 'id', placeholder: 'push id', 'aria-label': 'Push id', required: true }),
  h('button', { type: 'submit', class: 'ghost' }, 'Watch receipt'));

  mount(history, sent.length
    ? h('ul', { class: 'sent-list' }, sent.map((p) => h('li', {},
      h('a', { href: href(`pushes/${encodeURIComponent(p.id)}`, p.app) }, h('code', {}, p.id)),
      ` to ${p.target} (app ${p.app}) at ${time(p.at)}`)))
    : h('p', { class: 'muted' }, 'Pushes you send from this page are listed here.'));

  mount(view,
    pageHead('Pushes', `App ${currentApp()}: send a test push and watch its receipt.`),
    slot.el,
    h('div', { class: 'grid-2' },
      panel('Send a test push', form),
      h('div', {}, panel('Receipt', receiptView), panel('Watch a push', lookup), panel('Sent from here', history))));

  if (!watching) {
    mount(receiptView, h('p', { class: 'muted' }, 'Send a push, or watch one by id, to see its receipt here.'));
    return undefined;
  }
  let timer = null;
  let stopped = false;
  let loaded = false;
  mount(receiptView, loading());
  async function poll() {
    try {
      const r = await get(`/v1/push/${encodeURIComponent(watching)}`);
      if (stopped) return;
      slot.clear();
      mount(receiptView, receiptPanel(r));
      loaded = true;
    } catch (e) {
      if (stopped) return;
      if (loaded) slot.show(e);
      else failed(receiptView, e);
    } finally {
      if (!stopped) timer = setTimeout(poll, POLL_MS);
    }
  }
  poll();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

function receiptPanel(r) {
  const done = r.targeted !== null && r.delivered + r.expired >= r.targeted;
  return h('div', { 'data-push': r.id },
    h('div', { class: 'stats-row' },
      count('Targeted', r.targeted === null ? '…' : int(r.targeted), 'receipt-targeted'),
      count('Delivered', int(r.delivered), 'receipt-delivered'),
      count('Pending', int(r.pending), 'receipt-pending'),
      count('Expired', int(r.expired), 'receipt-expired')),
    kv([
      ['Push', h('code', {}, r.id)],
      ['State', done ? badge('settled', 'good') : badge('live: updating every second')],
      ['Delivery', r.delivery || 'live'],
      ['Created', time(r.created)],
      ['Expires', time(r.expires)],
    ]),
    r.providers ? [h('h4', {}, 'Provider path'), providerPath(r.providers)] : null);
}

function count(label, value, id) {
  return h('div', { class: 'stat' }, h('div', { class: 'tile-label' }, label), h('div', { class: 'stat-value', id }, value));
}
