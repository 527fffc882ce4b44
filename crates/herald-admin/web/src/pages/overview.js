// Live overview: polls GET /v1/overview every second, turns its cumulative counters into
// rates, and draws connections, messages/s, deliveries/s, delivery latency and queue depth over
// the last two minutes, with tables of every app and of the delivery worker per app and
// provider. A publisher key sees its own app and no server-wide figures.

import { get, session } from '../api.js';
import { LineChart } from '../chart.js';
import { h, mount } from '../dom.js';
import { age, int, ms, rate } from '../format.js';
import { errorSlot, pageHead, panel, table } from '../ui.js';

const POLL_MS = 1000;
const WINDOW_MS = 2 * 60 * 1000;
const KEEP = 200;

/** Mean and 95th percentile (ms) of what a histogram gained between two readings. */
function latency(before, after) {
  if (!before || !after) return [null, null];
  const count = after.count - before.count;
  if (count <= 0) return [null, null];
  const mean = ((after.sum_seconds - before.sum_seconds) / count) * 1000;
  const old = new Map(before.buckets.map(([le, n]) => [le, n]));
  let p95 = null;
  for (const [le, n] of after.buckets) {
    if (n - (old.get(le) || 0) >= count * 0.95) {
      p95 = le * 1000;
      break;
    }
  }
  return [mean, p95];
}

function sum(values) {
  return values.reduce((a, b) => a + (b || 0), 0);
}

function queueOf(app) {
  const providers = Object.values(app.providers || {});
  return [sum(providers.map((p) => p.queued)), sum(providers.map((p) => p.dead))];
}

/** Totals of one reading, the same shape for both roles. */
function totals(o) {
  if (o.server) {
    const c = o.server.connections;
    return {
      connections: [c.ws, c.sse, c.meteor + c.meteor_control],
      published: o.server.published,
      deliveries: o.server.deliveries,
      lag: o.server.delivery_lag,
      acks: sum(o.apps.map((a) => a.usage.acks)),
      queue: o.apps.map(queueOf).reduce((a, b) => [a[0] + b[0], a[1] + b[1]], [0, 0]),
    };
  }
  const app = o.apps[0] || { connections: 0, usage: {}, providers: {} };
  return {
    connections: [app.connections],
    published: app.usage.published,
    deliveries: app.usage.deliveries,
    lag: null,
    acks: app.usage.acks,
    queue: queueOf(app),
  };
}

function tile(label, id) {
  const value = h('div', { class: 'tile-value', id }, '—');
  return { el: h('div', { class: 'tile' }, h('div', { class: 'tile-label' }, label), value), value };
}

export function render(view) {
  const admin = session.role === 'admin';
  const slot = errorSlot();
  const tiles = {
    connections: tile('Connections', 'tile-connections'),
    messages: tile('Messages / s', 'tile-messages'),
    deliveries: tile('Deliveries / s', 'tile-deliveries'),
    latency: tile(admin ? 'Delivery latency p95' : 'Acks / s', 'tile-latency'),
    queue: tile('Queued provider jobs', 'tile-queue'),
  };
  const charts = {
    connections: new LineChart('Connections', admin ? ['WebSocket', 'SSE', 'Meteor'] : ['connections'], int, WINDOW_MS, true),
    traffic: new LineChart('Throughput / s', ['messages', 'deliveries'], rate, WINDOW_MS),
    latency: admin
      ? new LineChart('Delivery latency', ['mean', 'p95'], ms, WINDOW_MS)
      : new LineChart('Acks / s', ['acks'], rate, WINDOW_MS),
    queue: new LineChart('Provider jobs', ['queued', 'dead'], int, WINDOW_MS, true),
  };
  const appsPanel = h('div');
  const providersPanel = h('div');
  const updated = h('span', { class: 'muted', id: 'overview-updated' }, 'waiting for the first reading…');
  mount(view,
    pageHead('Overview', admin ? 'The whole server and every app, live.' : `App ${session.app}, live.`, updated),
    slot.el,
    h('div', { class: 'tiles' }, Object.values(tiles).map((t) => t.el)),
    h('div', { class: 'grid-2' }, Object.values(charts).map((c) => c.el)),
    panel(admin ? 'Apps' : 'App', appsPanel),
    panel('Delivery worker per app and provider', providersPanel));

  const readings = [];
  const points = { connections: [], traffic: [], latency: [], queue: [] };
  let timer = null;
  let stopped = false;

  async function poll() {
    try {
      const o = await get('/v1/overview');
      if (stopped) return;
      slot.clear();
      const t = totals(o);
      const prev = readings.length ? readings[readings.length - 1] : null;
      readings.push({ time: o.time_ms, t, o });
      if (readings.length > KEEP) readings.shift();
      let perSecond = [null, null, null];
      let lag = [null, null];
      if (prev) {
        const dt = (o.time_ms - prev.time) / 1000;
        if (dt > 0) {
          perSecond = [
            Math.max(0, (t.published - prev.t.published) / dt),
            Math.max(0, (t.deliveries - prev.t.deliveries) / dt),
            Math.max(0, (t.acks - prev.t.acks) / dt),
          ];
        }
        lag = latency(prev.t.lag, t.lag);
      }
      const push = (key, values) => {
        points[key].push({ t: o.time_ms, values });
        if (points[key].length > KEEP) points[key].shift();
      };
      push('connections', t.connections);
      push('traffic', perSecond.slice(0, 2));
      push('latency', admin ? lag : [perSecond[2]]);
      push('queue', t.queue);
      charts.connections.draw(points.connections);
      charts.traffic.draw(points.traffic);
      charts.latency.draw(points.latency);
      charts.queue.draw(points.queue);
      tiles.connections.value.textContent = int(sum(t.connections));
      tiles.messages.value.textContent = rate(perSecond[0]);
      tiles.deliveries.value.textContent = rate(perSecond[1]);
      tiles.latency.value.textContent = admin ? ms(lag[1]) : rate(perSecond[2]);
      tiles.queue.value.textContent = int(t.queue[0]);
      drawTables(o);
      updated.textContent = `updated ${new Date(o.time_ms).toLocaleTimeString('en-GB')}`;
    } catch (e) {
      if (!stopped) slot.show(e);
    } finally {
      if (!stopped) timer = setTimeout(poll, POLL_MS);
    }
  }

  function drawTables(o) {
    mount(appsPanel, table([
      { label: 'App', value: (a) => h('a', { href: `#/apps/${a.app}` }, a.app) },
      { label: 'Name', value: (a) => a.name },
      { label: 'Connections', value: (a) => int(a.connections), class: 'num' },
      { label: 'Published', value: (a) => int(a.usage.published), class: 'num' },
      { label: 'Deliveries', value: (a) => int(a.usage.deliveries), class: 'num' },
      { label: 'Acks', value: (a) => int(a.usage.acks), class: 'num' },
      { label: 'Peak conns', value: (a) => int(a.usage.peak_connections), class: 'num' },
      { label: 'Devices', value: (a) => int(a.devices), class: 'num' },
    ], o.apps, { empty: 'No apps.' }));
    const rows = [];
    for (const a of o.apps) {
      for (const [provider, f] of Object.entries(a.providers || {})) rows.push({ app: a.app, provider, f });
    }
    mount(providersPanel, table([
      { label: 'App', value: (r) => r.app },
      { label: 'Provider', value: (r) => r.provider },
      { label: 'Sends', value: (r) => int(r.f.sends), class: 'num' },
      { label: 'Accepted', value: (r) => int(r.f.successes), class: 'num' },
      { label: 'Failed', value: (r) => int(sum(Object.values(r.f.failures || {}))), class: 'num' },
      { label: 'Retries', value: (r) => int(r.f.retries), class: 'num' },
      { label: 'Avg', value: (r) => (r.f.avg_ms === undefined ? '—' : ms(r.f.avg_ms)), class: 'num' },
      { label: 'p95', value: (r) => (r.f.p95_ms === undefined ? '—' : ms(r.f.p95_ms)), class: 'num' },
      { label: 'Queued', value: (r) => int(r.f.queued ?? 0), class: 'num' },
      { label: 'Dead', value: (r) => int(r.f.dead ?? 0), class: 'num' },
      { label: 'Oldest', value: (r) => age(r.f.oldest_age_ms), class: 'num' },
    ], rows, { empty: 'No provider jobs yet: pushes that go out through APNs, FCM or Web Push show up here.' }));
  }

  poll();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
