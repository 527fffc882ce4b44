// Provider figures as tables: the delivery worker's figures per app and provider (sends,
// accepted, failed by reason, retries, send times, jobs in flight, dead letters, the oldest
// waiting job), and a push receipt's provider path per state (queued, acknowledged live,
// accepted, failed and skipped by reason, dead, in doubt).

import { h } from './dom.js';
import { age, int, ms } from './format.js';
import { table } from './ui.js';

function total(counts) {
  return Object.values(counts || {}).reduce((a, b) => a + (b || 0), 0);
}

/** A number cell a test (or a reader of the DOM) finds by `data-figure`. */
function figure(name, text) {
  return h('span', { 'data-figure': name }, text);
}

/**
 * The delivery worker's figures: `rows` are { app, provider, f } with `f` as
 * `GET /v1/jobs/stats` gives one provider's; `withApp` adds the app's column. Failures are
 * counted in the table and listed by reason below it.
 */
export function providerFigures(rows, { withApp = false, empty = 'No provider figures yet.' } = {}) {
  const columns = [
    withApp ? { label: 'App', value: (r) => r.app } : null,
    { label: 'Provider', value: (r) => h('b', {}, r.provider) },
    { label: 'Sends', value: (r) => figure('sends', int(r.f.sends ?? 0)), class: 'num' },
    { label: 'Accepted', value: (r) => figure('accepted', int(r.f.successes ?? 0)), class: 'num' },
    { label: 'Failed', value: (r) => figure('failed', int(total(r.f.failures))), class: 'num' },
    { label: 'Retries', value: (r) => figure('retries', int(r.f.retries ?? 0)), class: 'num' },
    { label: 'Avg send', value: (r) => figure('avg', r.f.avg_ms === undefined ? '—' : ms(r.f.avg_ms)), class: 'num' },
    { label: 'p95 send', value: (r) => figure('p95', r.f.p95_ms === undefined ? '—' : ms(r.f.p95_ms)), class: 'num' },
    { label: 'In flight', title: 'jobs waiting or running', value: (r) => figure('in-flight', int(r.f.queued ?? 0)), class: 'num' },
    { label: 'Dead', value: (r) => figure('dead', int(r.f.dead ?? 0)), class: 'num' },
    { label: 'Oldest waiting', value: (r) => figure('oldest', age(r.f.oldest_age_ms)), class: 'num' },
  ].filter(Boolean);
  const failures = [];
  for (const r of rows) {
    for (const [reason, n] of Object.entries(r.f.failures || {})) failures.push({ ...r, reason, n });
  }
  return h('div', { class: 'provider-figures' },
    table(columns, rows, { empty, rowAttrs: (r) => ({ 'data-provider': r.provider, 'data-app': r.app }) }),
    failures.length
      ? [h('h4', {}, 'Failed, by the provider\'s answer'), table([
        withApp ? { label: 'App', value: (r) => r.app } : null,
        { label: 'Provider', value: (r) => r.provider },
        { label: 'Answer', value: (r) => h('code', {}, r.reason) },
        { label: 'Sends', value: (r) => int(r.n), class: 'num' },
      ].filter(Boolean), failures, { rowAttrs: (r) => ({ 'data-failure': r.reason }) })]
      : null);
}

/** The rows of `providerFigures` for one app's `providers` map. */
export function providerRows(app, providers) {
  return Object.entries(providers || {}).map(([provider, f]) => ({ app, provider, f }));
}

/** A push receipt's provider path (`receipt.providers`), one row per state. */
export function providerPath(p) {
  const rows = [
    { state: 'queued', label: 'Queued', n: p.queued, says: 'waiting for the ack window, a worker or a retry, or running' },
    { state: 'live', label: 'Acknowledged live', n: p.live, says: 'the device acknowledged it before a provider push was needed; none was sent' },
    { state: 'accepted', label: 'Accepted', n: p.accepted, says: 'the provider accepted it' },
  ];
  const failed = Object.entries(p.failed || {});
  if (failed.length) {
    for (const [reason, n] of failed) {
      rows.push({ state: 'failed', reason, label: 'Failed', n, says: 'refused for good by the provider' });
    }
  } else {
    rows.push({ state: 'failed', label: 'Failed', n: 0, says: 'refused for good by the provider' });
  }
  for (const [reason, n] of Object.entries(p.skipped || {})) {
    rows.push({ state: 'skipped', reason, label: 'Skipped', n, says: 'not sent' });
  }
  rows.push(
    { state: 'dead', label: 'Dead', n: p.dead, says: 'dead letters: retried until the job gave up' },
    { state: 'in_doubt', label: 'In doubt', n: p.in_doubt, says: 'running when a server stopped and run again: the device may have it twice' },
  );
  return h('div', { id: 'receipt-providers' },
    table([
      { label: 'State', value: (r) => [h('b', {}, r.label), r.reason ? h('div', {}, h('code', { class: 'reason' }, r.reason)) : null] },
      { label: 'Jobs', value: (r) => int(r.n ?? 0), class: 'num' },
      { label: 'Meaning', value: (r) => h('span', { class: 'muted' }, r.says) },
    ], rows, { rowAttrs: (r) => ({ 'data-state': r.state, 'data-reason': r.reason }) }),
    h('p', { class: 'muted small-print' },
      `Sent: ${int(p.sent ?? 0)} (accepted and failed).`,
      p.expanding ? ' A broadcast still being expanded: more jobs may come.' : ''));
}
