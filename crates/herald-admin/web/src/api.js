// Every request the dashboard makes: same origin, the session cookie plus the
// X-Herald-Session header (the server accepts the cookie only with it), and for the admin key
// the app it is acting for in X-Herald-App. Errors keep the server's code and message.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** Who is logged in: { role: 'admin' | 'publisher', app, expires_at }, and the admin's app. */
export const session = {
  role: null,
  app: null,
  expiresAt: 0,
  /** The app the admin key acts for on the app-scoped pages. */
  actingApp: 'default',
};

let onExpired = () => {};

/** Called when a request answers 401 once logged in (expired, revoked): back to the login. */
export function whenSessionEnds(fn) {
  onExpired = fn;
}

/** The app the app-scoped pages show: the publisher key's, or the one the admin picked. */
export function currentApp() {
  return session.role === 'publisher' ? session.app : session.actingApp;
}

export async function call(method, path, body) {
  const headers = { 'X-Herald-Session': '1', Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (session.role === 'admin' && session.actingApp) headers['X-Herald-App'] = session.actingApp;
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
    });
  } catch (e) {
    throw new ApiError(0, 'network', `the server could not be reached: ${e.message}`);
  }
  const text = await response.text();
  let parsed = null;
  if (text) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = null;
    }
  }
  if (!response.ok) {
    const error = parsed && parsed.error;
    const err = error
      ? new ApiError(response.status, error.code, error.message)
      : new ApiError(response.status, `http_${response.status}`, text || response.statusText);
    if (response.status === 401 && session.role && !path.startsWith('/admin/session')) {
      onExpired(err);
    }
    throw err;
  }
  return parsed;
}

export const get = (path) => call('GET', path);
export const post = (path, body) => call('POST', path, body ?? {});
export const del = (path) => call('DELETE', path);
export const patch = (path, body) => call('PATCH', path, body);

/** A channel name as a path: each segment encoded, slashes kept. */
export function channelPath(name) {
  return name.split('/').map(encodeURIComponent).join('/');
}
