// Log in with the admin key or a publisher key. The key is posted once in the body of
// POST /admin/session; the server answers with an HttpOnly session cookie.

import { call } from '../api.js';
import { formValues, h } from '../dom.js';
import { busy, errorSlot } from '../ui.js';

export function render({ message, done }) {
  const slot = errorSlot();
  if (message) slot.show(message);
  const button = h('button', { type: 'submit', class: 'primary', id: 'login-button' }, 'Log in');
  const form = h('form', {
    class: 'login-form',
    id: 'login-form',
    onsubmit: async (e) => {
      e.preventDefault();
      const { key } = formValues(form);
      const who = await busy(button, slot, () => call('POST', '/admin/session', { key }));
      if (who) done(who);
    },
  },
  h('label', { for: 'key' }, 'Admin key or publisher key'),
  h('input', {
    id: 'key', name: 'key', type: 'password', autocomplete: 'current-password', required: true,
    autofocus: true, spellcheck: 'false',
  }),
  button,
  slot.el);
  return h('div', { class: 'login' },
    h('div', { class: 'login-card' },
      h('div', { class: 'brand big' }, h('span', { class: 'logo' }, 'H'), 'Herald', h('span', { class: 'brand-sub' }, 'admin')),
      h('p', { class: 'muted' },
        'The admin key shows the whole server and every app; a publisher key shows its own app. ',
        'The key is sent once and never appears in a URL; the session ends after its lifetime or when the key is revoked.'),
      form));
}
