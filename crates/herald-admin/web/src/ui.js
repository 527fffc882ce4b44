// Shared page pieces: panels, tables, key-value lists, error and notice boxes, a secret shown
// once with a Copy button, what a card shows while it loads, and a helper that runs an action
// with its button disabled and shows any error with its code.

import { h, mount } from './dom.js';

export function panel(title, ...children) {
  return h('section', { class: 'panel' },
    title ? h('header', { class: 'panel-head' }, h('h3', {}, title)) : null,
    h('div', { class: 'panel-body' }, ...children));
}

export function pageHead(title, subtitle, ...actions) {
  return h('div', { class: 'page-head' },
    h('div', {}, h('h2', {}, title), subtitle ? h('p', { class: 'muted' }, subtitle) : null),
    h('div', { class: 'actions' }, ...actions));
}

/** A box showing an API error as `code: message`. */
export function errorBox(err) {
  const code = err && err.code ? err.code : 'error';
  const message = err && err.message ? err.message : String(err);
  return h('div', { class: 'alert error', role: 'alert', 'data-code': code },
    h('code', {}, code), ' ', message);
}

export function notice(...children) {
  return h('div', { class: 'alert info' }, ...children);
}

/**
 * A secret shown this once: `title`, the secret with a Copy button (which selects the text for
 * a manual copy where the browser gives no clipboard), `extra` below it, and `note` saying it
 * cannot be shown again. `prefix` starts the ids of its parts (`secret-box`, `copy-secret`,
 * `copy-said`, `secret-once`) and `codeId` is the secret's.
 */
export function secretOnce(title, secret, { codeId, label = 'Secret', prefix = '', extra, note }) {
  const code = h('code', { class: 'copyable', id: codeId, 'data-secret': label }, secret);
  const said = h('span', { class: 'muted copy-said', id: `${prefix}copy-said`, 'aria-live': 'polite' });
  const copy = h('button', {
    type: 'button',
    class: 'ghost small',
    id: `${prefix}copy-secret`,
    onclick: async () => {
      try {
        await navigator.clipboard.writeText(secret);
        said.textContent = 'Copied.';
        copy.setAttribute('data-copied', 'yes');
      } catch {
        // No clipboard (a page served over plain http from another host): select the text
        // for a manual copy.
        const range = document.createRange();
        range.selectNodeContents(code);
        const selection = window.getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
        said.textContent = 'Selected: copy it with Ctrl+C (or ⌘C).';
        copy.setAttribute('data-copied', 'selected');
      }
    },
  }, 'Copy');
  return h('div', { class: 'secret', id: `${prefix}secret-box` },
    h('p', {}, h('b', {}, title)),
    h('div', { class: 'secret-row' }, code, copy, said),
    extra ? h('p', {}, extra) : null,
    h('p', { class: 'secret-once', id: `${prefix}secret-once` }, h('b', {}, 'Shown only once. '), note));
}

/** A slot that shows one error (or nothing). */
export function errorSlot() {
  const el = h('div', { class: 'error-slot' });
  return {
    el,
    show(err) { mount(el, errorBox(err)); },
    clear() { mount(el); },
  };
}

/** What a card shows until its content arrives; `failed` replaces it if the load fails. */
export function loading() {
  return h('p', { class: 'muted loading' }, 'Loading…');
}

/** Shows in `el` (a card that was loading) why its content could not be loaded. */
export function failed(el, err) {
  mount(el, errorBox(err));
}

/**
 * A table: columns [{ label, value: (row) => node|string, class?, title? }], rows, an optional
 * click handler per row and optional attributes per row. It scrolls sideways inside its
 * container when wider than the screen.
 */
export function table(columns, rows, { empty = 'Nothing yet.', onRow, rowAttrs } = {}) {
  if (!rows.length) return h('p', { class: 'muted empty' }, empty);
  return h('div', { class: 'table-wrap' }, h('table', {},
    h('thead', {}, h('tr', {}, columns.map((c) => h('th', { class: c.class, title: c.title }, c.label)))),
    h('tbody', {}, rows.map((row) => h('tr', {
      ...(rowAttrs ? rowAttrs(row) : {}),
      class: onRow ? 'clickable' : null,
      onclick: onRow ? () => onRow(row) : null,
    }, columns.map((c) => h('td', { class: c.class }, c.value(row))))))));
}

/** A definition list of [label, value] pairs (a null in place of a pair is left out). */
export function kv(pairs) {
  return h('dl', { class: 'kv' }, pairs.filter(Boolean).map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

export function badge(text, kind = '') {
  return h('span', { class: ['badge', kind] }, text);
}

/** Runs `action` with `button` disabled; an error goes to `slot`. */
export async function busy(button, slot, action) {
  if (slot) slot.clear();
  if (button) button.disabled = true;
  try {
    return await action();
  } catch (e) {
    if (slot) slot.show(e);
    return undefined;
  } finally {
    if (button) button.disabled = false;
  }
}

/** Parses JSON typed by the user, as an error the page can show. */
export function parseUserJson(text, what) {
  try {
    return JSON.parse(text);
  } catch (e) {
    const err = new Error(`${what} is not valid JSON: ${e.message}`);
    err.code = 'invalid_json';
    throw err;
  }
}
