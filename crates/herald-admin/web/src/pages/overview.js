// Live overview: polls GET /v1/overview every second, turns its cumulative counters into
// rates, and draws connections, messages published, channel messages delivered to subscribers
// and pushes delivered to devices per second, delivery latency and queue depth over the last
// two minutes, with tables of every app and of the delivery worker per app and provider. A
// publisher key sees its own app and no server-wide figures.

import { get, session } from '../api.js';
import { LineChart } from '../chart.js';
import { h, mount } from '../dom.js';
import { int, ms, rate } from '../format.js';
import { providerFigures, providerRows } from '../providers.js';
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

/**
 * Totals of one reading, the same shape for both roles. `messages` counts channel messages
 * queued to subscribers (on the node that answered), `pushes` pushes delivered to devices.
 */
function totals(o) {
  const messages = sum(o.apps.map((a) => a.messages_delivered));
  const pushes = sum(o.apps.map((a) => a.usage.deliveries));
  if (o.server) {
    const c = o.server.connections;
    return {
      connections: [c.ws, c.sse, c.meteor + c.meteor_control, c.pusher || 0, c.mqtt || 0],
      published: o.server.published,
      messages,
      pushes,
      lag: o.server.delivery_lag,
      acks: sum(o.apps.map((a) => a.usage.acks)),
      queue: o.apps.map(queueOf).reduce((a, b) => [a[0] + b[0], a[1] + b[1]], [0, 0]),
    };
  }
  const app = o.apps[0] || { connections: 0, usage: {}, providers: {} };
  return {
    connections: [app.connections],
    published: app.usage.published,
    messages,
    pushes,
    lag: null,
    acks: app.usage.acks,
    queue: queueOf(app),
  };
}

function tile(label, id, title) {
  const value = h('div', { class: 'tile-value', id }, '—');
  return { el: h('div', { class: 'tile', title }, h('div', { class: 'tile-label' }, label), value), value };
}

export function render(view) {
  const admin = session.role === 'admin';
  const slot = errorSlot();
  const tiles = {
    connections: tile('Connections', 'tile-connections'),
    messages: tile('Published / s', 'tile-messages', 'messages published: channel messages and pushes'),
    delivered: tile('Messages delivered / s', 'tile-messages-delivered',
      'channel messages queued to their subscribers (a message to 3 subscribers counts 3)'),
    pushes: tile('Pushes delivered / s', 'tile-pushes-delivered', 'pushes delivered to devices'),
    latency: tile(admin ? 'Delivery latency p95' : 'Acks / s', 'tile-latency'),
    queue: tile('Queued provider jobs', 'tile-queue'),
  };
  const charts = {
    connections: new LineChart('Connections', admin ? ['WebSocket', 'SSE', 'Meteor', 'Pusher', 'MQTT'] : ['connections'], int, WINDOW_MS, true),
    traffic: new LineChart('Throughput / s', ['published', 'messages delivered', 'pushes delivered'], rate, WINDOW_MS),
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
      let perSecond = [null, null, null, null];
      let lag = [null, null];
      if (prev) {
        const dt = (o.time_ms - prev.time) / 1000;
        if (dt > 0) {
          const per = (key) => Math.max(0, (t[key] - prev.t[key]) / dt);
          perSecond = [per('published'), per('messages'), per('pushes'), per('acks')];
        }
        lag = latency(prev.t.lag, t.lag);
      }
      const push = (key, values) => {
        points[key].push({ t: o.time_ms, values });
        if (points[key].length > KEEP) points[key].shift();
      };
      push('connections', t.connections);
      push('traffic', perSecond.slice(0, 3));
      push('latency', admin ? lag : [perSecond[3]]);
      push('queue', t.queue);
      charts.connections.draw(points.connections);
      charts.traffic.draw(points.traffic);
      charts.latency.draw(points.latency);
      charts.queue.draw(points.queue);
      tiles.connections.value.textContent = int(sum(t.connections));
      tiles.messages.value.textContent = rate(perSecond[0]);
      tiles.delivered.value.textContent = rate(perSecond[1]);
      tiles.pushes.value.textContent = rate(perSecond[2]);
      tiles.latency.value.textContent = admin ? ms(lag[1]) : rate(perSecond[3]);
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
      {
        label: 'Messages delivered',
        title: 'channel messages queued to subscribers by this node since it started',
        value: (a) => h('span', { 'data-figure': 'messages-delivered' }, int(a.messages_delivered)),
        class: 'num',
      },
      { label: 'Pushes delivered', value: (a) => int(a.usage.deliveries), class: 'num' },
      { label: 'Acks', value: (a) => int(a.usage.acks), class: 'num' },
      { label: 'Peak conns', value: (a) => int(a.usage.peak_connections), class: 'num' },
      { label: 'Devices', value: (a) => int(a.devices), class: 'num' },
    ], o.apps, { empty: 'No apps.', rowAttrs: (a) => ({ 'data-app': a.app }) }));
    mount(providersPanel, providerFigures(o.apps.flatMap((a) => providerRows(a.app, a.providers)), {
      withApp: true,
      empty: 'No provider jobs yet: pushes that go out through APNs, FCM or Web Push show up here.',
    }));
  }

  poll();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
