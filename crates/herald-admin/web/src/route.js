// The route in the URL's hash: `#/page/rest?app=ID`. The app-scoped pages (channels, devices,
// pushes, hooks) name the app they show in `app`, so a link, a bookmark or a reload opens the same
// app's page and the app picker follows it; every link the dashboard makes names it.

import { currentApp } from './api.js';

/** Pages whose figures belong to one app (the admin key acts for the app the route names). */
export const SCOPED = new Set(['channels', 'devices', 'pushes', 'hooks']);

/**
 * The route in `hash`: `#/devices/phone%2F1?app=shop` ->
 * { page: 'devices', rest: 'phone/1', app: 'shop', path: 'devices/phone%2F1' }.
 */
export function parseRoute(hash = window.location.hash) {
  const raw = hash.replace(/^#\/?/, '');
  const q = raw.indexOf('?');
  const path = q < 0 ? raw : raw.slice(0, q);
  const params = new URLSearchParams(q < 0 ? '' : raw.slice(q + 1));
  let decoded;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    decoded = path;
  }
  const slash = decoded.indexOf('/');
  return {
    page: slash < 0 ? decoded : decoded.slice(0, slash),
    rest: slash < 0 ? '' : decoded.slice(slash + 1),
    app: params.get('app') || null,
    path,
  };
}

/**
 * The hash of `path` (its parts already encoded, e.g. `devices/${encodeURIComponent(id)}`):
 * an app-scoped page names `app`, the app in view unless given.
 */
export function href(path, app = currentApp()) {
  const page = path.split('/')[0];
  return SCOPED.has(page) && app ? `#/${path}?app=${encodeURIComponent(app)}` : `#/${path}`;
}

/** Opens `path` (see `href`). */
export function go(path, app) {
  window.location.hash = href(path, app);
}
