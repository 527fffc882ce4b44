// A small live line chart drawn as SVG: several series over the last few minutes, a y axis
// scaled to the largest value shown, four grid lines, and a legend with each series' latest
// value. Colours come from the stylesheet (classes s0..s5), so no inline style is needed.

import { h, s, mount } from './dom.js';

const W = 560;
const H = 180;
const PAD = { left: 48, right: 12, top: 10, bottom: 22 };

function niceMax(v) {
  if (!(v > 0)) return 1;
  const exp = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) {
    if (v <= m * exp) return m * exp;
  }
  return 10 * exp;
}

function tick(v) {
  if (v >= 1e6) return `${(v / 1e6).toFixed(v % 1e6 ? 1 : 0)}M`;
  if (v >= 1e3) return `${(v / 1e3).toFixed(v % 1e3 ? 1 : 0)}k`;
  if (v >= 10 || v === 0) return String(Math.round(v));
  return v.toFixed(v >= 1 ? 1 : 2);
}

export class LineChart {
  /**
   * @param {string} title
   * @param {string[]} names  series names
   * @param {(v: number) => string} format  legend value format
   * @param {number} windowMs  how much time the x axis spans
   */
  constructor(title, names, format, windowMs) {
    this.names = names;
    this.format = format;
    this.windowMs = windowMs;
    this.svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart-svg', role: 'img', 'aria-label': title });
    this.legend = h('div', { class: 'legend' });
    this.el = h('section', { class: 'panel chart' },
      h('header', { class: 'panel-head' }, h('h3', {}, title), this.legend),
      this.svg);
  }

  /** Redraws from `points`: [{ t, values: [number|null per series] }], oldest first. */
  draw(points) {
    const now = points.length ? points[points.length - 1].t : Date.now();
    const from = now - this.windowMs;
    const shown = points.filter((p) => p.t >= from);
    let max = 0;
    for (const p of shown) for (const v of p.values) if (v !== null && v > max) max = v;
    max = niceMax(max);
    const x = (t) => PAD.left + ((t - from) / this.windowMs) * (W - PAD.left - PAD.right);
    const y = (v) => H - PAD.bottom - (v / max) * (H - PAD.top - PAD.bottom);
    const nodes = [];
    for (let i = 0; i <= 4; i += 1) {
      const v = (max * i) / 4;
      nodes.push(s('line', { x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v), class: 'grid' }));
      nodes.push(s('text', { x: PAD.left - 6, y: y(v) + 4, class: 'axis', 'text-anchor': 'end' }, tick(v)));
    }
    const minutes = this.windowMs / 60000;
    for (let m = 0; m <= minutes; m += 1) {
      const t = from + m * 60000;
      const label = m === minutes ? 'now' : `−${minutes - m}m`;
      nodes.push(s('text', { x: x(t), y: H - 6, class: 'axis', 'text-anchor': 'middle' }, label));
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
