// The Sluice node's dashboard, the parts that hold none of the feeds' state:
// number formats, DOM and SVG element helpers, the line chart, a histogram's
// quantile and the theme button. app.js (loaded after this file) hands a
// chart its time span. Every text goes through textContent, never HTML.
'use strict';

globalThis.sluiceDraw = (() => {
  const SVG = 'http://www.w3.org/2000/svg';

  // -- formatting -------------------------------------------------------------

  function fmtMs(ms) {
    if (ms == null || !isFinite(ms)) return '–';
    if (ms < 1) return `${Math.round(ms * 1000)} µs`;
    if (ms < 100) return `${ms.toFixed(1)} ms`;
    if (ms < 1000) return `${Math.round(ms)} ms`;
    if (ms < 60000) return `${(ms / 1000).toFixed(2)} s`;
    return `${(ms / 60000).toFixed(1)} min`;
  }
  const fmtCount = (n) => (n == null ? '–' : Number(n).toLocaleString('en-US'));
  const fmtRate = (r) => (r < 10 ? r.toFixed(1) : Math.round(r).toString());
  const fmtPct = (x) => `${Math.round(x * 100)}%`;

  // -- DOM helpers ------------------------------------------------------------

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k === 'style') Object.assign(e.style, v); // CSSOM: allowed by the CSP
      else e.setAttribute(k, v);
    }
    for (const c of children) if (c != null) e.append(c);
    return e;
  }

  function svg(tag, attrs) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  }

  function titled(node, text) {
    const t = svg('title');
    t.textContent = text;
    node.append(t);
    return node;
  }

  // A line chart of `lines` ([{name, cls, points: [{t, v}]}]) over the
  // `spanMs` up to `t1`; `fmt` formats the axis' top value and the
  // legend's figures.
  function lineChart(lines, fmt, t1, spanMs, height = 70) {
    const w = 600;
    const h = height;
    const t0 = t1 - spanMs;
    let max = 0;
    for (const l of lines) for (const p of l.points) if (p.t >= t0) max = Math.max(max, p.v);
    max = max > 0 ? max * 1.1 : 1;
    const box = svg('svg', { viewBox: `0 0 ${w} ${h}`, class: 'chart', preserveAspectRatio: 'none' });
    box.append(svg('line', { x1: 0, y1: h - 0.5, x2: w, y2: h - 0.5, class: 'axis' }));
    for (const l of lines) {
      const pts = l.points.filter((p) => p.t >= t0)
        .map((p) => `${(((p.t - t0) / spanMs) * w).toFixed(1)},${(h - 2 - (p.v / max) * (h - 6)).toFixed(1)}`);
      if (pts.length > 0) box.append(titled(svg('polyline', { points: pts.join(' '), class: `line ${l.cls}` }), l.name));
    }
    const legend = el('div', { class: 'legend' }, el('span', { class: 'muted', text: `max ${fmt(max / 1.1)}` }));
    for (const l of lines) {
      const last = l.points.length ? l.points[l.points.length - 1].v : null;
      legend.append(el('span', { class: `key ${l.cls}`, text: `${l.name} ${last == null ? '–' : fmt(last)}` }));
    }
    return el('div', { class: 'chart-box' }, box, legend);
  }

  // The q-quantile of a histogram's calls (cumulative `buckets` per upper
  // bound, `total` with +Inf), interpolated within its bucket as
  // Prometheus' histogram_quantile does.
  function quantile(q, bounds, buckets, total) {
    const rank = q * total;
    let lower = 0;
    let below = 0;
    for (let i = 0; i < bounds.length; i++) {
      if (buckets[i] >= rank) {
        const inBucket = buckets[i] - below;
        return inBucket > 0 ? lower + ((bounds[i] - lower) * (rank - below)) / inBucket : bounds[i];
      }
      lower = bounds[i];
      below = buckets[i];
    }
    return bounds[bounds.length - 1];
  }

  // -- theme ------------------------------------------------------------------

  const THEMES = ['auto', 'light', 'dark'];
  function applyTheme(t) {
    if (t === 'auto') delete document.documentElement.dataset.theme;
    else document.documentElement.dataset.theme = t;
    document.getElementById('theme').textContent = `theme: ${t}`;
  }
  function setupTheme() {
    let t = 'auto';
    try {
      t = localStorage.getItem('sluice-theme') || 'auto';
    } catch (_) { /* storage off: auto */ }
    if (!THEMES.includes(t)) t = 'auto';
    applyTheme(t);
    document.getElementById('theme').addEventListener('click', () => {
      t = THEMES[(THEMES.indexOf(t) + 1) % THEMES.length];
      try {
        localStorage.setItem('sluice-theme', t);
      } catch (_) { /* not kept */ }
      applyTheme(t);
    });
  }

  return { fmtMs, fmtCount, fmtRate, fmtPct, el, svg, titled, lineChart, quantile, setupTheme };
})();
