// The dashboard's shell: checks the session, draws the top bar (pages, the app the admin key
// acts for, who is logged in, log out) and routes `#/page/...?app=ID` to the page modules. The
// app picker follows the route: an app-scoped page acts for the app its URL names, and an app's
// own page (`#/apps/ID`) for that app. No key is ever put in a URL: logging in posts it once,
// and the session lives in an HttpOnly cookie.

import { call, get, session, whenSessionEnds } from './api.js';
import { h, mount } from './dom.js';
import { time } from './format.js';
import { SCOPED, go, href, parseRoute } from './route.js';
import { errorBox } from './ui.js';
import * as login from './pages/login.js';
import * as overview from './pages/overview.js';
import * as apps from './pages/apps.js';
import * as channels from './pages/channels.js';
import * as devices from './pages/devices.js';
import * as pushes from './pages/pushes.js';
import * as hooks from './pages/hooks.js';

const PAGES = [
  { path: 'overview', label: 'Overview', page: overview },
  { path: 'apps', label: 'Apps', page: apps },
  { path: 'channels', label: 'Channels', page: channels },
  { path: 'devices', label: 'Devices', page: devices },
  { path: 'pushes', label: 'Pushes', page: pushes },
  { path: 'hooks', label: 'Webhooks', page: hooks },
];

const root = document.getElementById('root');
let cleanup = null;
let loginMessage = null;
/** Counts renders: one that a newer render overtook while it waited for the server stops. */
let renders = 0;

/** Makes `app` the one the admin key acts for (kept for this tab). */
function actFor(app) {
  session.actingApp = app;
  sessionStorage.setItem('herald.actingApp', app);
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

function topBar(route, appList) {
  const active = route.page;
  const nav = h('nav', { class: 'nav' }, PAGES.map((p) => h('a', {
    href: href(p.path),
    class: p.path === active ? 'active' : null,
    'data-page': p.path,
  }, p.label)));
  let scope;
  if (session.role === 'admin') {
    const ids = appList.map((a) => a.id);
    // An app the route names that the list lacks (deleted, mistyped) is still shown as the
    // one in view; the page says what the server answers for it.
    if (session.actingApp && !ids.includes(session.actingApp)) ids.push(session.actingApp);
    const select = h('select', {
      id: 'acting-app',
      'aria-label': 'App',
      onchange: (e) => {
        const app = e.target.value;
        actFor(app);
        if (SCOPED.has(active)) {
          go(active, app);
        } else if (active === 'apps' && route.rest) {
          go(`apps/${encodeURIComponent(app)}`);
        } else {
          render();
        }
      },
    }, ids.map((id) => h('option', { value: id, selected: id === session.actingApp }, id)));
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
  const route = parseRoute();
  const { page, rest } = route;
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
  const admin = session.role === 'admin';
  // The app in view: the one the route names, else (the route then gains it) the picker's.
  const named = SCOPED.has(page) ? route.app : page === 'apps' && rest ? rest : null;
  if (admin && named) actFor(named);
  const generation = ++renders;
  const appList = await loadApps();
  if (generation !== renders) return;
  if (admin && !named && appList.length && !appList.some((a) => a.id === session.actingApp)) {
    actFor(appList[0].id);
  }
  if (SCOPED.has(page) && !route.app) {
    window.history.replaceState(null, '', href(route.path));
  }
  const view = h('main', { class: 'view', id: 'view', 'data-page': page });
  mount(root, topBar(route, appList), view);
  if (!admin && named && named !== session.app) {
    mount(view, errorBox({
      code: 'not_found',
      message: `this page is of app ${named}; the publisher key logged in is app ${session.app}'s`,
    }), h('p', {}, h('a', { href: href(SCOPED.has(page) ? page : 'apps', session.app) }, `Open app ${session.app}`)));
    return;
  }
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
