// The dashboard's shell: checks the session, draws the top bar (pages, the app the admin key
// acts for, who is logged in, log out) and routes `#/page/...` to the page modules. No key is
// ever put in a URL: logging in posts it once, and the session lives in an HttpOnly cookie.

import { call, get, session, whenSessionEnds } from './api.js';
import { h, mount } from './dom.js';
import { time } from './format.js';
import * as login from './pages/login.js';
import * as overview from './pages/overview.js';
import * as apps from './pages/apps.js';
import * as channels from './pages/channels.js';
import * as devices from './pages/devices.js';
import * as pushes from './pages/pushes.js';

const PAGES = [
  { path: 'overview', label: 'Overview', page: overview },
  { path: 'apps', label: 'Apps', page: apps },
  { path: 'channels', label: 'Channels', page: channels },
  { path: 'devices', label: 'Devices', page: devices },
  { path: 'pushes', label: 'Pushes', page: pushes },
];

const root = document.getElementById('root');
let cleanup = null;
let loginMessage = null;

/** The route in the hash: `#/channels/chat/1` -> ['channels', 'chat/1']. */
function route() {
  const raw = decodeURIComponent(window.location.hash.replace(/^#\/?/, ''));
  const slash = raw.indexOf('/');
  return slash < 0 ? [raw, ''] : [raw.slice(0, slash), raw.slice(slash + 1)];
}

export function go(path) {
  window.location.hash = `#/${path}`;
}

async function loadApps() {
  if (session.role !== 'admin') return [];
  try {
    const answer = await get('/v1/apps');
    return answer.apps || [];
  } catch {
    return [];
  }
}

async function logout() {
  try {
    await call('DELETE', '/admin/session');
  } finally {
    session.role = null;
    session.app = null;
    go('login');
    render();
  }
}

function topBar(active, appList) {
  const nav = h('nav', { class: 'nav' }, PAGES.map((p) => h('a', {
    href: `#/${p.path}`,
    class: p.path === active ? 'active' : null,
    'data-page': p.path,
  }, p.label)));
  let scope;
  if (session.role === 'admin') {
    const select = h('select', {
      id: 'acting-app',
      'aria-label': 'App',
      onchange: (e) => {
        session.actingApp = e.target.value;
        sessionStorage.setItem('herald.actingApp', session.actingApp);
        render();
      },
    }, appList.map((a) => h('option', { value: a.id, selected: a.id === session.actingApp }, a.id)));
    scope = h('label', { class: 'scope' }, 'App', select);
  } else {
    scope = h('span', { class: 'scope' }, 'App ', h('b', {}, session.app));
  }
  return h('header', { class: 'topbar' },
    h('div', { class: 'brand' }, h('span', { class: 'logo' }, 'H'), 'Herald', h('span', { class: 'brand-sub' }, 'admin')),
    nav,
    h('div', { class: 'who' },
      scope,
      h('span', { class: ['role', session.role], title: `session ends ${time(session.expiresAt * 1000)}` },
        session.role === 'admin' ? 'admin key' : 'publisher key'),
      h('button', { class: 'ghost', id: 'logout', onclick: logout }, 'Log out')));
}

async function render() {
  if (cleanup) {
    cleanup();
    cleanup = null;
  }
  const [page, rest] = route();
  if (!session.role || page === 'login') {
    if (session.role && page === 'login') {
      go('overview');
      return;
    }
    mount(root, login.render({
      message: loginMessage,
      done: (who) => {
        loginMessage = null;
        Object.assign(session, { role: who.role, app: who.app, expiresAt: who.expires_at });
        go('overview');
        render();
      },
    }));
    return;
  }
  const entry = PAGES.find((p) => p.path === page);
  if (!entry) {
    go('overview');
    return;
  }
  const appList = await loadApps();
  if (session.role === 'admin' && appList.length && !appList.some((a) => a.id === session.actingApp)) {
    session.actingApp = appList[0].id;
  }
  const view = h('main', { class: 'view', id: 'view', 'data-page': page });
  mount(root, topBar(page, appList), view);
  const done = entry.page.render(view, rest, { go, appList });
  cleanup = typeof done === 'function' ? done : null;
}

whenSessionEnds((err) => {
  session.role = null;
  loginMessage = err;
  go('login');
  render();
});

async function start() {
  session.actingApp = sessionStorage.getItem('herald.actingApp') || 'default';
  try {
    const who = await call('GET', '/admin/session');
    Object.assign(session, { role: who.role, app: who.app, expiresAt: who.expires_at });
  } catch {
    session.role = null;
  }
  window.addEventListener('hashchange', render);
  render();
}

start();
