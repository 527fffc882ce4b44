// A small live line chart drawn as SVG: several series over the last few minutes, a y axis
// scaled to the largest value shown, four grid lines, and a legend with each series' latest
// value. Colours come from the stylesheet (classes s0..s5), so no inline style is needed.

import { h, s, mount } from './dom.js';

const W = 560;
const H = 180;
const PAD = { left: 48, right: 12, top: 10, bottom: 22 };

/** The top of the y axis: a round number at or above `v`, a multiple of 4 for whole counts. */
function niceMax(v, integer) {
  if (integer) v = Math.max(v, 4);
  if (!(v > 0)) return 1;
  const exp = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 4, 5, 8, 10]) {
    const top = m * exp;
    if (v <= top && (!integer || Number.isInteger(top / 4))) return top;
  }
  return 10 * exp;
}

/** An x axis label: how long before the newest reading. */
function ago(ms) {
  if (ms <= 0) return 'now';
  const s = Math.round(ms / 1000);
  return s >= 60 && s % 60 === 0 ? `−${s / 60}m` : `−${s}s`;
}

function tick(v) {
  if (v >= 1e6) return `${(v / 1e6).toFixed(v % 1e6 ? 1 : 0)}M`;
  if (v >= 1e3) return `${(v / 1e3).toFixed(v % 1e3 ? 1 : 0)}k`;
  if (v >= 10 || v === 0) return String(Math.round(v));
  return String(Math.round(v * 1000) / 1000);
}

export class LineChart {
  /**
   * @param {string} title
   * @param {string[]} names  series names
   * @param {(v: number) => string} format  legend value format
   * @param {number} windowMs  the most time the x axis spans (it starts at a minute and grows)
   * @param {boolean} integer  whole counts (y ticks on whole numbers)
   */
  constructor(title, names, format, windowMs, integer = false) {
    this.names = names;
    this.format = format;
    this.windowMs = windowMs;
    this.integer = integer;
    this.svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart-svg', role: 'img', 'aria-label': title });
    this.legend = h('div', { class: 'legend' });
    this.el = h('section', { class: 'panel chart' },
      h('header', { class: 'panel-head' }, h('h3', {}, title), this.legend),
      this.svg);
  }

  /** Redraws from `points`: [{ t, values: [number|null per series] }], oldest first. */
  draw(points) {
    const now = points.length ? points[points.length - 1].t : Date.now();
    const first = points.length ? points[0].t : now;
    const span = Math.min(this.windowMs, Math.max(60_000, Math.ceil((now - first) / 60_000) * 60_000));
    const from = now - span;
    const shown = points.filter((p) => p.t >= from);
    let max = 0;
    for (const p of shown) for (const v of p.values) if (v !== null && v > max) max = v;
    max = niceMax(max, this.integer);
    const x = (t) => PAD.left + ((t - from) / span) * (W - PAD.left - PAD.right);
    const y = (v) => H - PAD.bottom - (v / max) * (H - PAD.top - PAD.bottom);
    const nodes = [];
    for (let i = 0; i <= 4; i += 1) {
      const v = (max * i) / 4;
      nodes.push(s('line', { x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v), class: 'grid' }));
      nodes.push(s('text', { x: PAD.left - 6, y: y(v) + 4, class: 'axis', 'text-anchor': 'end' }, tick(v)));
    }
    for (let i = 0; i <= 4; i += 1) {
      const t = from + (span * i) / 4;
      const anchor = i === 0 ? 'start' : i === 4 ? 'end' : 'middle';
      nodes.push(s('text', { x: x(t), y: H - 6, class: 'axis', 'text-anchor': anchor }, ago(now - t)));
    }
    this.names.forEach((_, i) => {
      let d = '';
      let pen = false;
      for (const p of shown) {
        const v = p.values[i];
        if (v === null || v === undefined || Number.isNaN(v)) {
          pen = false;
          continue;
        }
        d += `${pen ? 'L' : 'M'}${x(p.t).toFixed(1)},${y(v).toFixed(1)}`;
        pen = true;
      }
      if (d) nodes.push(s('path', { d, class: `line s${i % 6}` }));
    });
    mount(this.svg, nodes);
    const last = shown.length ? shown[shown.length - 1].values : [];
    mount(this.legend, this.names.map((name, i) => h('span', { class: 'legend-item' },
      h('i', { class: `swatch s${i % 6}` }),
      `${name} `,
      h('b', {}, last[i] === null || last[i] === undefined ? '—' : this.format(last[i])))));
  }
}
