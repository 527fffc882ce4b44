// Apps: the admin key lists every app and creates new ones; an app's page shows its usage,
// limits, devices and provider figures, (admin key only) its publisher keys: create one (its
// secret is shown once) and revoke one, and its Pusher credentials (pusher.js). A publisher key
// sees its own app, read-only but for its Pusher credentials, which the API lets it manage.

import { del, get, post, session } from '../api.js';
import { formValues, h, mount } from '../dom.js';
import { int, time } from '../format.js';
import { providerFigures, providerRows } from '../providers.js';
import { pusherPanel } from '../pusher.js';
import { href } from '../route.js';
import { badge, busy, errorSlot, failed, kv, loading, pageHead, panel, table } from '../ui.js';

export function render(view, rest, { go }) {
  if (session.role !== 'admin') {
    return appPage(view, session.app, { go });
  }
  if (rest) return appPage(view, rest, { go });
  return listPage(view, { go });
}

function listPage(view, { go }) {
  const slot = errorSlot();
  const list = h('div', {}, loading());
  const created = h('div');
  const button = h('button', { type: 'submit', class: 'primary', id: 'create-app' }, 'Create app');
  const form = h('form', {
    class: 'inline-form',
    id: 'create-app-form',
    onsubmit: async (e) => {
      e.preventDefault();
      const v = formValues(form);
      const body = { id: v.id.trim() };
      if (v.name.trim()) body.name = v.name.trim();
      const answer = await busy(button, slot, () => post('/v1/apps', body));
      if (answer) {
        form.reset();
        mount(created, secretBox('App created. Its first publisher key and token secret are shown only now:', [
          ['App', answer.app.id],
          ['Publisher key', answer.key],
          ['Token secret', answer.token_secret],
        ]));
        load();
      }
    },
  },
  h('input', { name: 'id', placeholder: 'app id (a-z, 0-9, -)', required: true, pattern: '[a-z0-9][a-z0-9\\-]*', 'aria-label': 'App id' }),
  h('input', { name: 'name', placeholder: 'display name (optional)', 'aria-label': 'Name' }),
  button);

  async function load() {
    try {
      const answer = await get('/v1/apps');
      mount(list, table([
        { label: 'Id', value: (a) => h('a', { href: `#/apps/${a.id}` }, a.id) },
        { label: 'Name', value: (a) => a.name },
        { label: 'Limits', value: (a) => limitsText(a.limits) },
        { label: 'Created', value: (a) => time(a.created) },
      ], answer.apps, { onRow: (a) => go(`apps/${a.id}`), empty: 'No apps.' }));
    } catch (e) {
      failed(list, e);
    }
  }
  mount(view,
    pageHead('Apps', 'Each app has its own publisher keys, token secret, channels, devices and usage.'),
    slot.el,
    panel('New app', form, created),
    panel('All apps', list));
  load();
}

function limitsText(limits) {
  const entries = Object.entries(limits || {}).filter(([, v]) => v !== null && v !== undefined);
  return entries.length ? entries.map(([k, v]) => `${k}: ${v}`).join(', ') : 'none';
}

function secretBox(title, pairs) {
  return h('div', { class: 'secret', id: 'secret-box' },
    h('p', {}, h('b', {}, title)),
    kv(pairs.map(([k, v]) => [k, h('code', { class: 'copyable', 'data-secret': k }, v)])),
    h('p', { class: 'muted' }, 'Copy it now: the server keeps only a hash and cannot show it again.'));
}

function appPage(view, id, { go }) {
  const admin = session.role === 'admin';
  const slot = errorSlot();
  const stats = h('div', {}, loading());
  const more = h('div');
  const keys = h('div');
  const shown = h('div');
  const keyButton = h('button', { type: 'submit', class: 'primary', id: 'create-key' }, 'Create key');
  const keyForm = h('form', {
    class: 'inline-form',
    id: 'create-key-form',
    onsubmit: async (e) => {
      e.preventDefault();
      const { label } = formValues(keyForm);
      const answer = await busy(keyButton, slot, () => post(`/v1/apps/${id}/keys`, { label }));
      if (answer) {
        keyForm.reset();
        mount(shown, secretBox(`New publisher key ${answer.key_id}:`, [['Key', answer.key]]));
        loadKeys();
      }
    },
  },
  h('input', { name: 'label', placeholder: 'label, e.g. "backend 2026"', 'aria-label': 'Key label' }),
  keyButton);

  async function loadStats() {
    try {
      const [app, s, overview] = await Promise.all([
        get(`/v1/apps/${id}`),
        get(`/v1/apps/${id}/stats`),
        get('/v1/overview'),
      ]);
      const live = (overview.apps || []).find((a) => a.app === id) || {};
      mount(stats,
        h('div', { class: 'grid-2' },
          panel('App', kv([
            ['Id', app.id],
            ['Name', app.name],
            ['Created', time(app.created)],
            ['Devices', int(s.devices)],
          ])),
          panel('Usage', kv([
            ['Published', int(s.usage.published)],
            ['Messages delivered', [
              h('span', { id: 'usage-messages-delivered' }, int(live.messages_delivered)),
              h('span', { class: 'muted' }, ' to channel subscribers, by this node since it started'),
            ]],
            ['Pushes delivered', h('span', { id: 'usage-pushes-delivered' }, int(s.usage.deliveries))],
            ['Acks', int(s.usage.acks)],
            ['Peak connections', int(s.usage.peak_connections)],
          ]))));
      mount(more,
        h('div', { id: 'app-providers' }, panel('Providers', providerFigures(providerRows(id, s.providers), {
          empty: 'No provider figures yet: pushes that go out through APNs, FCM or Web Push show up here.',
        }))),
        panel('Limits', Object.keys(s.limits || {}).length
          ? kv(Object.entries(s.limits).map(([k, v]) => [k, v === null ? 'none' : String(v)]))
          : h('p', { class: 'muted empty' }, 'No limits set.')));
    } catch (e) {
      failed(stats, e);
    }
  }

  async function loadKeys() {
    if (!admin) return;
    try {
      const answer = await get(`/v1/apps/${id}/keys`);
      mount(keys, table([
        { label: 'Key id', value: (k) => h('code', {}, k.id) },
        { label: 'Label', value: (k) => k.label || '—' },
        { label: 'Created', value: (k) => time(k.created) },
        {
          label: '',
          class: 'right',
          value: (k) => h('button', {
            class: 'danger small',
            'data-revoke': k.id,
            onclick: async (e) => {
              if (!window.confirm(`Revoke key ${k.id}? Requests and sessions using it stop at once.`)) return;
              const done = await busy(e.target, slot, () => del(`/v1/apps/${id}/keys/${k.id}`));
              if (done !== undefined) loadKeys();
            },
          }, 'Revoke'),
        },
      ], answer.keys, { empty: 'This app has no publisher keys.' }));
    } catch (e) {
      slot.show(e);
    }
  }

  mount(view,
    pageHead(`App ${id}`, admin ? null : 'Your publisher key\'s app.',
      admin ? h('a', { href: href('apps'), class: 'button ghost' }, 'All apps') : null,
      h('button', { class: 'ghost', onclick: () => go('overview') }, 'Live overview')),
    slot.el,
    stats,
    admin
      ? panel('Publisher keys', keyForm, shown, keys)
      : panel('Publisher keys', h('p', { class: 'muted empty' }, badge('read-only'), 'Keys are created and revoked with the admin key.')),
    pusherPanel(id),
    more);
  loadStats();
  loadKeys();
}
