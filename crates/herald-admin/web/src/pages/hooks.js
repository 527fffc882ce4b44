// Webhooks of the app in view: its endpoints with their format and state and figures (queued,
// dead, delivered, failures in a row, the last error), read again every POLL_MS while the tab
// is visible; a form that registers one (format, URL, event types as the server lists them,
// only those of Pusher's webhooks for a `pusher` endpoint, channel patterns, description,
// offline delay) and shows its signing secret once, with a copy button (a `pusher` endpoint
// is signed with the app's Pusher secret instead). An endpoint's page enables or disables it,
// rotates its secret (the old one signs too for the overlap), sends a signed test event and
// shows the answer, deletes it (after a confirmation), and lists its dead letters with Replay
// and Drop.

import { currentApp, del, get, patch, post } from '../api.js';
import { formValues, h, mount } from '../dom.js';
import { int, json, time } from '../format.js';
import { formatBadge, pusherEventLabel, pusherTypes } from '../hook-format.js';
import { href } from '../route.js';
import { badge, busy, errorSlot, failed, kv, loading, notice, pageHead, panel, secretOnce, table } from '../ui.js';

/** How often the endpoints' figures are read while the tab is visible. */
const POLL_MS = 5000;

/** Most dead letters listed on an endpoint's page. */
const DEAD_PAGE = 100;

export function render(view, rest, { go }) {
  return rest ? endpointPage(view, rest, { go }) : listPage(view, { go });
}

/** `/v1/apps/{app}/hooks`, and below it. */
function base() {
  return `/v1/apps/${encodeURIComponent(currentApp())}/hooks`;
}

const STATE_KIND = { ok: 'good', failing: 'warn', paused: 'warn', disabled: '' };

function stateBadge(state) {
  return h('span', { 'data-state': state }, badge(state, STATE_KIND[state] ?? ''));
}

/** A number cell a test (or a reader of the DOM) finds by `data-figure`. */
function figure(name, value) {
  return h('span', { 'data-figure': name }, int(value ?? 0));
}

function millis(rfc3339) {
  return rfc3339 ? Date.parse(rfc3339) : 0;
}

/**
 * A signing secret shown this once: the text, a copy button, and the note that it cannot be
 * shown again.
 */
function signingSecretOnce(title, secret, extra) {
  return secretOnce(title, secret, {
    codeId: 'hook-secret',
    label: 'Signing secret',
    extra,
    note: 'Copy it now into the receiver that verifies signatures: the server keeps it sealed and ' +
      'never shows it again (rotate the secret to get a new one).',
  });
}

function endpointTable(hooks, go) {
  return table([
    { label: 'Id', value: (e) => h('a', { href: href(`hooks/${e.id}`) }, `#${e.id}`) },
    { label: 'URL', value: (e) => h('code', { class: 'hook-url' }, e.url) },
    { label: 'Format', value: (e) => formatBadge(e.format) },
    { label: 'Events', value: (e) => e.events.map((t) => badge(t)) },
    { label: 'State', value: (e) => stateBadge(e.state) },
    { label: 'Queued', value: (e) => figure('queued', e.queued), class: 'num' },
    { label: 'Dead', value: (e) => figure('dead', e.dead), class: 'num' },
    { label: 'Delivered', value: (e) => figure('delivered', e.delivered), class: 'num' },
    { label: 'Failures', title: 'failed attempts in a row', value: (e) => figure('failures', e.failures), class: 'num' },
    { label: 'Last error', value: (e) => (e.last_error ? h('code', { class: 'reason' }, e.last_error) : '—') },
  ], hooks, {
    onRow: (e) => go(`hooks/${e.id}`),
    empty: 'No webhook endpoints yet: register one below.',
    rowAttrs: (e) => ({ 'data-hook': e.id }),
  });
}

/**
 * The create form's event checkboxes: every type the server lists, and `*` (all but the opt-in
 * `subscription_count`, future ones too); for a `pusher` endpoint, the listed types Pusher's
 * webhooks have, each with Pusher's name, and `*` (the first four).
 */
function eventChoices(types, format) {
  const box = (value, label) => h('label', { class: 'check' },
    h('input', { type: 'checkbox', name: 'events', value, 'data-event': value }), label);
  if (format === 'pusher') {
    return h('fieldset', { class: 'checks', id: 'hook-events', 'data-format': 'pusher' },
      h('legend', {}, 'Event types (Pusher\'s webhooks)'),
      box('*', h('span', {}, h('b', {}, 'all'), ' (*: channel_occupied, channel_vacated, member_added, member_removed; the others are sent only when checked)')),
      pusherTypes(types).map((t) => box(t, pusherEventLabel(t))));
  }
  return h('fieldset', { class: 'checks', id: 'hook-events', 'data-format': 'standard' },
    h('legend', {}, 'Event types'),
    box('*', h('span', {}, h('b', {}, 'all'), ' (*, including types added later; not subscription_count, which is sent only when checked)')),
    types.map((t) => box(t, h('code', {}, t))));
}

/** What the form says under the format it shows. */
function formatNote(format) {
  if (format !== 'pusher') {
    return h('p', { class: 'muted small-print', id: 'hook-format-note' },
      'Herald\'s events, signed with the endpoint\'s own secret (Standard Webhooks), shown once below.');
  }
  return h('p', { class: 'muted small-print', id: 'hook-format-note' },
    'Pusher\'s webhooks ({"time_ms":..,"events":[{"name":"channel_occupied",...}]}), signed with the app\'s ',
    h('a', { href: href(`apps/${encodeURIComponent(currentApp())}`) }, 'Pusher secret'),
    ' in X-Pusher-Key and X-Pusher-Signature, so a handler written for Pusher checks them with its Pusher SDK. ' +
    'Until the app has Pusher credentials, the endpoint\'s events wait in its queue.');
}

/** What a `pusher` endpoint's registration shows instead of a signing secret. */
function pusherRegistered(id) {
  return notice(h('span', { id: 'hook-pusher-registered' },
    h('b', {}, `Endpoint #${id} registered in Pusher's format. `),
    'Its requests are signed with the app\'s Pusher secret (X-Pusher-Key, X-Pusher-Signature), not with a secret of its own.'));
}

function createForm(types, slot, created, reload) {
  const button = h('button', { type: 'submit', class: 'primary', id: 'create-hook' }, 'Register endpoint');
  const events = h('div', {}, eventChoices(types, 'standard'));
  const note = h('div', {}, formatNote('standard'));
  const delayLabel = h('label', { for: 'hook-offline-delay' }, 'Offline delay in milliseconds (how long a user.offline waits for the user to come back; default 3000)');
  const delay = h('input', { id: 'hook-offline-delay', name: 'offline_delay_ms', type: 'number', min: 0, max: 600000, step: 1, placeholder: '3000' });
  // The event types and the notes follow the format; a Pusher endpoint has no user.offline.
  const showFormat = (format) => {
    mount(events, eventChoices(types, format));
    mount(note, formatNote(format));
    delayLabel.hidden = format === 'pusher';
    delay.hidden = format === 'pusher';
  };
  const format = h('select', {
    id: 'hook-format',
    name: 'format',
    onchange: (e) => showFormat(e.target.value),
  },
  h('option', { value: 'standard' }, 'standard: Herald\'s events'),
  h('option', { value: 'pusher' }, 'pusher: Pusher\'s webhooks'));
  const form = h('form', {
    class: 'stack-form',
    id: 'create-hook-form',
    onsubmit: async (e) => {
      e.preventDefault();
      const v = formValues(form);
      const body = { url: v.url.trim(), events: new FormData(form).getAll('events') };
      const pusher = v.format === 'pusher';
      if (pusher) body.format = 'pusher';
      const channels = v.channels.split(',').map((c) => c.trim()).filter(Boolean);
      if (channels.length) body.channels = channels;
      if (v.description.trim()) body.description = v.description.trim();
      if (!pusher && v.offline_delay_ms.trim()) body.offline_delay_ms = Number(v.offline_delay_ms.trim());
      const answer = await busy(button, slot, () => post(base(), body));
      if (answer) {
        form.reset();
        showFormat('standard');
        mount(created, answer.hook.format === 'pusher'
          ? pusherRegistered(answer.hook.id)
          : signingSecretOnce(`Endpoint #${answer.hook.id} registered. Its signing secret:`, answer.secret));
        reload();
      }
    },
  },
  h('label', { for: 'hook-url' }, 'URL (http or https; the server POSTs batches of events to it)'),
  h('input', { id: 'hook-url', name: 'url', type: 'url', required: true, placeholder: 'https://backend.example.com/herald/hooks' }),
  h('label', { for: 'hook-format' }, 'Format (how requests are written and signed; set at registration)'),
  format,
  note,
  events,
  h('label', { for: 'hook-channels' }, 'Channel patterns, comma-separated (optional: events about other channels are not sent)'),
  h('input', { id: 'hook-channels', name: 'channels', placeholder: 'rooms/*, news' }),
  h('label', { for: 'hook-description' }, 'Description (optional, at most 200 characters)'),
  h('input', { id: 'hook-description', name: 'description', maxlength: 200, placeholder: 'what it is for' }),
  delayLabel,
  delay,
  h('div', { class: 'form-row' }, button));
  return form;
}

function listPage(view, { go }) {
  const slot = errorSlot();
  const list = h('div', { id: 'hook-list' }, loading());
  const formSlot = h('div', {}, loading());
  const created = h('div', { id: 'hook-created' });
  const updated = h('span', { class: 'muted', id: 'hooks-updated' }, 'reading…');
  let timer = null;
  let stopped = false;
  let formShown = false;

  async function load() {
    try {
      const answer = await get(base());
      if (stopped) return;
      mount(list, endpointTable(answer.hooks, go));
      if (!formShown) {
        formShown = true;
        mount(formSlot, createForm(answer.event_types || [], slot, created, load));
      }
      updated.textContent = `updated ${new Date().toLocaleTimeString('en-GB')}`;
    } catch (e) {
      if (stopped) return;
      if (list.querySelector('.loading')) {
        failed(list, e);
        mount(formSlot, h('p', { class: 'muted empty' }, 'Not loaded.'));
      } else {
        slot.show(e);
      }
    }
  }

  function tick() {
    timer = setTimeout(async () => {
      if (document.visibilityState === 'visible') await load();
      if (!stopped) tick();
    }, POLL_MS);
  }

  mount(view,
    pageHead('Webhooks', `App ${currentApp()}: endpoints its backend registered, told of its users, connections and channels (signed, batched, retried).`,
      updated,
      h('button', { class: 'ghost', id: 'reload-hooks', onclick: load }, 'Reload')),
    slot.el,
    panel('Endpoints', list),
    panel('Register an endpoint', created, formSlot));
  load();
  tick();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

function endpointPage(view, id, { go }) {
  const path = `${base()}/${encodeURIComponent(id)}`;
  const slot = errorSlot();
  const details = h('div', {}, loading());
  const figures = h('div', {}, loading());
  const shown = h('div', { id: 'hook-shown' });
  const tested = h('div', { id: 'hook-test-result' });
  const dead = h('div', { id: 'hook-dead' }, loading());
  const toggle = h('button', { class: 'ghost', id: 'toggle-hook', disabled: true }, 'Disable');
  const signing = h('div', { id: 'hook-signing' }, loading());
  const testNote = h('p', { class: 'muted' }, 'Sends one signed hook.test event now (not queued) and shows how the endpoint answered.');
  let current = null;

  async function load() {
    try {
      const hook = await get(path);
      current = hook;
      mount(details, kv([
        ['URL', h('code', { class: 'hook-url' }, hook.url)],
        ['Format', formatBadge(hook.format)],
        ['Description', hook.description || '—'],
        ['Events', hook.events.map((t) => badge(t))],
        ['Channels', hook.channels.length ? hook.channels.map((c) => h('code', { class: 'pattern' }, c)) : 'every channel'],
        hook.format === 'pusher' ? null : ['Offline delay', `${int(hook.offline_delay_ms)} ms`],
        ['Registered', time(millis(hook.created))],
      ]));
      mount(figures, kv([
        ['State', stateBadge(hook.state)],
        ['Queued', [figure('queued', hook.queued), hook.oldest_queued ? h('span', { class: 'muted' }, ` (oldest due ${time(millis(hook.oldest_queued))})`) : null]],
        ['Dead letters', figure('dead', hook.dead)],
        ['Delivered', figure('delivered', hook.delivered)],
        ['Failures in a row', figure('failures', hook.failures)],
        ['Failing since', time(millis(hook.failing_since))],
        ['Next attempt', time(millis(hook.next_attempt))],
        ['Last error', hook.last_error ? h('code', { class: 'reason', id: 'hook-last-error' }, hook.last_error) : '—'],
      ]));
      toggle.textContent = hook.enabled ? 'Disable' : 'Enable';
      toggle.disabled = false;
      if (hook.format === 'pusher') {
        testNote.textContent = 'Sends one request signed as Pusher\'s webhooks are, with no events, now (not queued), and shows how the endpoint answered.';
      }
      if (signing.querySelector('.loading')) {
        mount(signing, hook.format === 'pusher'
          ? h('p', { class: 'muted', id: 'hook-pusher-signing' },
            'Signed with the app\'s Pusher secret (X-Pusher-Key, X-Pusher-Signature), not with a secret of its own: ',
            h('a', { href: href(`apps/${encodeURIComponent(currentApp())}`) }, 'rotate it on the app\'s page'), '.')
          : [rotateForm, shown]);
      }
    } catch (e) {
      const waiting = [details, figures, signing].filter((el) => el.querySelector('.loading'));
      waiting.forEach((el, i) => (i === 0 ? failed(el, e) : mount(el, h('p', { class: 'muted empty' }, 'Not loaded.'))));
      if (!waiting.length) slot.show(e);
    }
  }

  async function loadDead() {
    try {
      const answer = await get(`${path}/dead?limit=${DEAD_PAGE}`);
      const row = (d) => `${path}/dead/${encodeURIComponent(d.id)}`;
      mount(dead, table([
        { label: 'Id', value: (d) => int(d.id), class: 'num' },
        { label: 'Event', value: (d) => h('code', {}, d.event_id) },
        { label: 'Type', value: (d) => badge(d.type) },
        { label: 'Died', value: (d) => time(millis(d.died)) },
        { label: 'Why', value: (d) => h('code', { class: 'reason' }, d.reason) },
        { label: 'Event JSON', value: (d) => h('pre', { class: 'data' }, json(d.event)) },
        {
          label: '',
          class: 'right',
          value: (d) => h('div', { class: 'actions' },
            h('button', {
              class: 'ghost small',
              'data-replay': d.id,
              onclick: async (e) => {
                const done = await busy(e.target, slot, () => post(`${row(d)}/replay`));
                if (done !== undefined) { loadDead(); load(); }
              },
            }, 'Replay'),
            h('button', {
              class: 'danger small',
              'data-drop': d.id,
              onclick: async (e) => {
                if (!window.confirm(`Drop dead letter ${d.id} (${d.type})? It is deleted for good.`)) return;
                const done = await busy(e.target, slot, () => del(row(d)));
                if (done !== undefined) { loadDead(); load(); }
              },
            }, 'Drop')),
        },
      ], answer.dead, {
        empty: 'No dead letters: every event was delivered or is still being retried.',
        rowAttrs: (d) => ({ 'data-dead': d.id }),
      }), answer.next ? h('p', { class: 'muted' }, `Showing the first ${DEAD_PAGE}.`) : null);
    } catch (e) {
      failed(dead, e);
    }
  }

  toggle.addEventListener('click', async () => {
    if (!current) return;
    const enabled = !current.enabled;
    const answer = await busy(toggle, slot, () => patch(path, { enabled }));
    if (answer) load();
  });

  const testButton = h('button', {
    class: 'primary',
    id: 'test-hook',
    onclick: async () => {
      mount(tested);
      const answer = await busy(testButton, slot, () => post(`${path}/test`));
      if (!answer) return;
      mount(tested, h('div', {
        class: ['alert', answer.delivered ? 'info' : 'error'],
        id: 'test-answer',
        'data-delivered': answer.delivered ? 'yes' : 'no',
      },
      answer.delivered ? h('b', {}, 'Delivered. ') : h('b', {}, 'Not delivered. '),
      answer.status === null ? 'No HTTP answer' : `HTTP ${answer.status}`,
      ` in ${int(answer.latency_ms)} ms.`,
      answer.error ? [' ', h('code', { class: 'reason' }, answer.error)] : null));
    },
  }, 'Send a test event');

  const rotateButton = h('button', { type: 'submit', class: 'ghost', id: 'rotate-hook' }, 'Rotate secret');
  const rotateForm = h('form', {
    class: 'inline-form',
    id: 'rotate-hook-form',
    onsubmit: async (e) => {
      e.preventDefault();
      const hours = Number(formValues(rotateForm).overlap_hours || 0);
      if (!window.confirm(`Give endpoint #${id} a new signing secret? The old one keeps signing for ${hours} h.`)) return;
      const answer = await busy(rotateButton, slot, () => post(`${path}/rotate-secret`, { overlap_seconds: Math.round(hours * 3600) }));
      if (answer) {
        mount(shown, signingSecretOnce(`Endpoint #${id}'s new signing secret:`, answer.secret,
          answer.previous_valid_until
            ? `The previous secret signs requests too until ${time(millis(answer.previous_valid_until))}: update the receiver before then.`
            : 'The previous secret no longer signs.'));
      }
    },
  },
  h('label', { for: 'rotate-overlap' }, 'Overlap (hours)'),
  h('input', { id: 'rotate-overlap', name: 'overlap_hours', type: 'number', min: 0, max: 168, step: 'any', value: '24', 'aria-label': 'Overlap in hours' }),
  rotateButton);

  const deleteButton = h('button', {
    class: 'danger',
    id: 'delete-hook',
    onclick: async () => {
      const what = current ? `${current.url}` : `#${id}`;
      if (!window.confirm(`Delete endpoint #${id} (${what})? Its queued events and dead letters are deleted with it.`)) return;
      const done = await busy(deleteButton, slot, () => del(path));
      if (done !== undefined) go('hooks');
    },
  }, 'Delete');

  mount(view,
    pageHead(`Webhook endpoint #${id}`, `App ${currentApp()}.`,
      h('a', { href: href('hooks'), class: 'button ghost' }, 'All endpoints'),
      h('button', { class: 'ghost', onclick: () => { load(); loadDead(); } }, 'Reload'),
      toggle,
      deleteButton),
    slot.el,
    h('div', { class: 'grid-2' }, panel('Endpoint', details), panel('Delivery', figures)),
    h('div', { class: 'grid-2' },
      panel('Test', testNote, testButton, tested),
      panel('Signing secret', signing)),
    panel(`Dead letters (up to ${DEAD_PAGE})`, dead));
  load();
  loadDead();
}
