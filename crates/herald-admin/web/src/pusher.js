// An app's Pusher credentials, a panel of its page (docs/pusher.md, section 1): whether it has
// some, its Pusher app id and key, and until when a rotated-out secret is still accepted; create
// them (drawn, or imported: the app id, key and secret an app moving from Pusher, Laravel Reverb
// or soketi keeps), rotate the secret with an overlap, delete them after a confirmation. The
// secret is in the answers of creating and rotating only, so it is shown there, once, with a
// Copy button; nothing reads it back. Beside the key: the settings pusher-js and the server SDKs
// need to reach this server.

import { del, get, post } from './api.js';
import { formValues, h, mount } from './dom.js';
import { time } from './format.js';
import { busy, errorSlot, failed, kv, loading, panel, secretOnce } from './ui.js';

/** Longest overlap a rotation takes, in hours (the API's 7 days). */
const MAX_OVERLAP_HOURS = 168;

/** An app id or a key of an import, as the API takes them. */
const NAME_PATTERN = '[A-Za-z0-9_.\\-]+';

function millis(rfc3339) {
  return rfc3339 ? Date.parse(rfc3339) : 0;
}

/** Whether `err` is the API saying the app has no credentials (not that the app is missing). */
function noCredentials(err) {
  return err && err.code === 'not_found' && /has no Pusher credentials/.test(err.message || '');
}

/** The pusher-js options and server SDK settings that reach the server this page came from. */
function connectionHints(credentials) {
  const tls = window.location.protocol === 'https:';
  const host = window.location.hostname;
  const port = Number(window.location.port) || (tls ? 443 : 80);
  const client = [
    `const pusher = new Pusher('${credentials.key}', {`,
    "  cluster: 'herald',",
    `  wsHost: '${host}',`,
    tls ? `  wssPort: ${port},` : `  wsPort: ${port},`,
    `  forceTLS: ${tls},`,
    `  enabledTransports: [${tls ? "'ws', 'wss'" : "'ws'"}],`,
    '  disableStats: true,',
    '});',
  ].join('\n');
  const server = [
    'const pusher = new Pusher({',
    `  appId: '${credentials.app_id}', key: '${credentials.key}', secret: '(the secret)',`,
    `  host: '${host}', port: '${port}', useTLS: ${tls},`,
    '});',
  ].join('\n');
  return h('div', { class: 'pusher-hints' },
    h('h4', {}, 'pusher-js and Laravel Echo'),
    h('pre', { class: 'data', id: 'pusher-client-hint' }, client),
    h('h4', {}, 'Server SDKs (Node; the others take the same host and port)'),
    h('pre', { class: 'data', id: 'pusher-server-hint' }, server),
    h('p', { class: 'muted small-print' },
      'The host and port this page was loaded from: behind a proxy, use the address your clients reach.'));
}

/** The panel of app `app`'s Pusher credentials. */
export function pusherPanel(app) {
  const path = `/v1/apps/${encodeURIComponent(app)}/pusher`;
  const slot = errorSlot();
  const state = h('div', { id: 'pusher-state' }, loading());
  const shown = h('div', { id: 'pusher-shown' });

  /** Shows `secret` once; `extra` says more. */
  function showSecret(title, secret, extra) {
    mount(shown, secretOnce(title, secret, {
      codeId: 'pusher-secret',
      label: 'Pusher secret',
      prefix: 'pusher-',
      extra,
      note: 'Copy it now into your backends\' Pusher SDK settings: the server keeps it sealed and ' +
        'never shows it again (rotate the secret to get a new one).',
    }));
  }

  async function create(button, body) {
    const answer = await busy(button, slot, () => post(path, body));
    if (!answer) return false;
    showSecret(`App ${app}'s Pusher credentials are created. The secret:`, answer.secret,
      `App id ${answer.app_id}, key ${answer.key}.`);
    load();
    return true;
  }

  function noneView() {
    const createButton = h('button', {
      class: 'primary',
      id: 'pusher-create',
      onclick: () => create(createButton, {}),
    }, 'Create credentials');
    const importButton = h('button', { type: 'submit', class: 'ghost', id: 'pusher-import' }, 'Import');
    const importForm = h('form', {
      class: 'inline-form',
      id: 'pusher-import-form',
      onsubmit: async (e) => {
        e.preventDefault();
        const body = {};
        for (const [name, value] of Object.entries(formValues(importForm))) {
          if (value.trim()) body[name] = value.trim();
        }
        if (await create(importButton, body)) importForm.reset();
      },
    },
    h('input', { name: 'app_id', id: 'pusher-import-app-id', placeholder: 'app id', maxlength: 64, pattern: NAME_PATTERN, autocomplete: 'off', 'aria-label': 'Pusher app id' }),
    h('input', { name: 'key', id: 'pusher-import-key', placeholder: 'key', maxlength: 64, pattern: NAME_PATTERN, autocomplete: 'off', 'aria-label': 'Pusher key' }),
    h('input', { name: 'secret', id: 'pusher-import-secret', placeholder: 'secret', maxlength: 256, autocomplete: 'off', 'aria-label': 'Pusher secret' }),
    importButton);
    return h('div', { 'data-pusher': 'none' },
      h('p', { class: 'muted empty', id: 'pusher-none' },
        'This app has no Pusher credentials: Pusher\'s SDKs, pusher-js and Laravel Echo cannot use it yet.'),
      h('div', { class: 'form-row' }, createButton,
        h('span', { class: 'muted' }, 'a 7-digit app id, a key and a secret of 20 hex digits, drawn at random')),
      h('h4', {}, 'Or keep the values of Pusher, Laravel Reverb or soketi (an empty field is drawn)'),
      importForm);
  }

  function credentialsView(credentials) {
    const until = credentials.previous_secret_valid_until;
    const rotateButton = h('button', { type: 'submit', class: 'ghost', id: 'pusher-rotate' }, 'Rotate secret');
    const rotateForm = h('form', {
      class: 'inline-form',
      id: 'pusher-rotate-form',
      onsubmit: async (e) => {
        e.preventDefault();
        const v = formValues(rotateForm);
        const hours = Number(v.overlap_hours || 0);
        if (!window.confirm(`Give app ${app} a new Pusher secret? The previous one is accepted too for ${hours} h.`)) return;
        const body = { overlap_seconds: Math.round(hours * 3600) };
        if (v.secret.trim()) body.secret = v.secret.trim();
        const answer = await busy(rotateButton, slot, () => post(`${path}/rotate`, body));
        if (!answer) return;
        rotateForm.reset();
        showSecret(`App ${app}'s new Pusher secret:`, answer.secret, answer.previous_valid_until
          ? `The previous secret is accepted too until ${time(millis(answer.previous_valid_until))}: update your backends before then.`
          : 'The previous secret is no longer accepted.');
        load();
      },
    },
    h('label', { for: 'pusher-overlap' }, 'Overlap (hours)'),
    h('input', { id: 'pusher-overlap', name: 'overlap_hours', type: 'number', min: 0, max: MAX_OVERLAP_HOURS, step: 'any', value: '24', 'aria-label': 'Overlap in hours' }),
    h('input', { id: 'pusher-rotate-secret', name: 'secret', maxlength: 256, autocomplete: 'off', placeholder: 'new secret (optional: drawn when empty)', 'aria-label': 'New Pusher secret' }),
    rotateButton);
    const deleteButton = h('button', {
      class: 'danger',
      id: 'pusher-delete',
      onclick: async () => {
        if (!window.confirm(`Delete app ${app}'s Pusher credentials (key ${credentials.key})? The key stops working at once: ` +
          'connections made with it are closed and requests signed with its secret are refused.')) return;
        const done = await busy(deleteButton, slot, () => del(path));
        if (done === undefined) return;
        mount(shown);
        load();
      },
    }, 'Delete credentials');
    return h('div', { 'data-pusher': 'yes' },
      kv([
        ['App id', h('code', { id: 'pusher-app-id' }, credentials.app_id)],
        ['Key', h('code', { id: 'pusher-key' }, credentials.key)],
        ['Secret', h('span', { class: 'muted' }, 'not shown: only creating the credentials or rotating the secret shows it, once')],
        ['Created', time(millis(credentials.created))],
        ['Previous secret', until
          ? h('span', { id: 'pusher-overlap-until' }, `accepted too until ${time(millis(until))} (the rotation's overlap)`)
          : 'none accepted'],
      ]),
      connectionHints(credentials),
      h('h4', {}, 'Rotate the secret (the previous one is accepted too for the overlap, at most 7 days; 0 for none)'),
      rotateForm,
      h('div', { class: 'form-row pusher-delete' }, deleteButton));
  }

  async function load() {
    try {
      const credentials = await get(path);
      mount(state, credentialsView(credentials));
    } catch (e) {
      if (noCredentials(e)) {
        mount(state, noneView());
      } else {
        failed(state, e);
      }
    }
  }

  load();
  return h('div', { id: 'app-pusher' }, panel('Pusher', slot.el, shown, state));
}
