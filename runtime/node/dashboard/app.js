// The Sluice node's dashboard: breaker bands, AIMD limits, tiers, verdicts,
// stall budgets and gateway overhead, drawn as SVG from two feeds of the
// node that serves this page: GET /events (breaker transitions, verdicts;
// a snapshot with the recent transitions on every connect) and a low-rate
// GET /status poll (gauges and counters). No library, nothing fetched from
// elsewhere. Every text from the node goes through textContent, never HTML:
// a model name is whatever a client sent.
'use strict';

(() => {
  const WINDOW_MS = 10 * 60 * 1000; // what is kept
  const POLL_MS = 2000; // the /status poll
  const MAX_VERDICTS = 50; // rows kept in the verdict list
  const MAX_POINTS = 400; // samples kept per series (10 min at 2 s: 300)
  const RECONNECT_MIN_MS = 1000;
  const RECONNECT_MAX_MS = 10000;
  const POLL_TIMEOUT_MS = 5000; // a /status answer later than this: down
  const RENDER_EVERY_MS = 250; // events are drawn in batches at most this often
  const OUTCOMES = ['ok', 'transient', 'timeout', 'rate_limited', 'permanent'];
  const VIEWS_MS = [60 * 1000, 10 * 60 * 1000]; // what the charts may show

  // -- state ------------------------------------------------------------------

  const state = {
    viewMs: WINDOW_MS, // what the charts show: the last minute or ten
    offsetMs: 0, // node clock minus this browser's clock
    sources: new Map(), // name -> source record (see sourceRecord)
    tiers: { global: [], cluster: [] }, // [{t, cap, in_use, waiting}]
    overhead: [], // [{t, p50, p99}] in seconds
    prevOverhead: null, // the last poll's cumulative histogram
    verdicts: [], // newest first
    lastStatus: null,
    link: 'connecting',
    downSince: null,
    events: null,
    pingMs: 0, // the node's heartbeat on /events (0: none)
    lastEventAt: Date.now(),
    renderTimer: null,
    eventsRetryMs: RECONNECT_MIN_MS,
    eventsTimer: null,
  };

  const now = () => Date.now() + state.offsetMs;
  const { fmtMs, fmtCount, fmtRate, fmtPct, el, svg, titled, quantile, setupTheme } = globalThis.sluiceDraw;
  const fmtClock = (ms) => new Date(ms - state.offsetMs).toLocaleTimeString('en-GB');
  // A line chart over the charts' span, up to now.
  const lineChart = (lines, fmt, height) =>
    globalThis.sluiceDraw.lineChart(lines, fmt, now(), state.viewMs, height);

  function sourceRecord(name) {
    let s = state.sources.get(name);
    if (!s) {
      s = {
        name,
        generation: 0,
        bands: [], // [{state, from, generation}] oldest first
        limit: [], // [{t, v}]
        inFlight: [],
        rates: new Map(OUTCOMES.map((o) => [o, []])), // outcome -> [{t, v}]
        prevAttempts: null, // {t, counts}
        health: 'ok',
      };
      state.sources.set(name, s);
    }
    return s;
  }

  function push(series, point) {
    series.push(point);
    const cut = now() - WINDOW_MS;
    while (series.length > MAX_POINTS || (series.length > 1 && series[1].t < cut))
      series.shift();
  }


  // -- breakers ---------------------------------------------------------------

  // A transition {source, to, generation, at_ms}: a new band from at_ms.
  // Older or repeated generations are ignored (the snapshot and the live
  // stream overlap); a lower one means the node restarted.
  function applyTransition(t) {
    const s = sourceRecord(t.source);
    if (t.generation <= s.generation) return;
    if (s.bands.length === 0 && t.from)
      // Before the first transition known: its `from` state, since the
      // node started (or the window's start).
      s.bands.push({ state: t.from, from: windowStart(), generation: t.generation - 1 });
    s.generation = t.generation;
    s.bands.push({ state: t.to, from: t.at_ms, generation: t.generation });
    s.bands.sort((a, b) => a.from - b.from);
    const cut = now() - WINDOW_MS;
    while (s.bands.length > 1 && s.bands[1].from < cut) s.bands.shift();
  }

  const lastBand = (s) => (s.bands.length ? s.bands[s.bands.length - 1].state : null);

  // The earliest time a band may start: the window's start, or the node's.
  function windowStart() {
    return Math.max(now() - WINDOW_MS, state.startedMs || 0);
  }

  // A node process other than the one seen so far (its start time moved):
  // generations and counters start again, and the time it was away shows
  // as a band of its own.
  function noteProcess(startedMs) {
    if (typeof startedMs !== 'number') return;
    if (state.startedMs != null && startedMs !== state.startedMs) restarted();
    state.startedMs = startedMs;
  }

  function restarted() {
    const from = state.lastDown || now();
    for (const s of state.sources.values()) {
      s.generation = 0;
      s.prevAttempts = null;
      if (!s.provisional) s.bands.push({ state: 'down', from, generation: 0 });
    }
    state.prevOverhead = null;
    showNotice(`The node restarted (seen at ${fmtClock(now())}): breaker generations and counters start again.`);
  }

  function onSnapshot(data) {
    noteProcess(data.started_ms);
    if (typeof data.ping_ms === 'number') state.pingMs = data.ping_ms;
    for (const s of state.sources.values())
      if (s.provisional) {
        // Seeded by /status before any snapshot: the history replaces it.
        s.bands = [];
        s.generation = 0;
        s.provisional = false;
      }
    const history = Array.isArray(data.history) ? data.history : [];
    for (const b of data.breakers || []) {
      const s = sourceRecord(b.source);
      // A generation that went back: a new process started within the
      // same second as the old one.
      if (b.generation < s.generation) restarted();
    }
    for (const t of history) applyTransition(t);
    for (const b of data.breakers || []) {
      const s = sourceRecord(b.source);
      if (s.bands.length === 0 || b.generation > s.generation || lastBand(s) === 'down') {
        // No transition on record: the state holds since before the window.
        s.bands.push({ state: b.state, from: s.bands.length ? now() : windowStart(), generation: b.generation });
        s.generation = b.generation;
      }
    }
    scheduleRender();
  }

  function bandsView(s) {
    const w = 600;
    const h = 22;
    const t1 = now();
    const t0 = t1 - state.viewMs;
    const box = svg('svg', { viewBox: `0 0 ${w} ${h}`, class: 'bands', preserveAspectRatio: 'none', 'data-source': s.name });
    s.bands.forEach((b, i) => {
      const from = Math.max(b.from, t0);
      const to = i + 1 < s.bands.length ? s.bands[i + 1].from : t1;
      if (to <= t0) return;
      const x = ((from - t0) / state.viewMs) * w;
      const width = Math.max(1, ((to - from) / state.viewMs) * w);
      box.append(titled(svg('rect', { x: x.toFixed(1), y: 0, width: width.toFixed(1), height: h, class: `band ${b.state}`, 'data-state': b.state, 'data-generation': b.generation }),
        `${b.state} from ${fmtClock(b.from)} for ${fmtMs(to - b.from)} · generation ${b.generation}`));
    });
    return box;
  }

  // -- /status ----------------------------------------------------------------

  function onStatus(st, t) {
    noteProcess(st.started_ms);
    state.lastStatus = st;
    for (const src of st.sources || []) {
      const s = sourceRecord(src.name);
      s.health = src.health;
      push(s.limit, { t, v: src.aimd_limit });
      push(s.inFlight, { t, v: src.in_flight });
      const counts = src.attempts_by_outcome || {};
      if (s.prevAttempts) {
        const dt = (t - s.prevAttempts.t) / 1000;
        for (const o of new Set([...OUTCOMES, ...Object.keys(counts)])) {
          const d = (counts[o] || 0) - (s.prevAttempts.counts[o] || 0);
          if (!s.rates.has(o)) s.rates.set(o, []);
          if (dt > 0 && d >= 0) push(s.rates.get(o), { t, v: d / dt });
        }
      }
      s.prevAttempts = { t, counts };
      // Back after a restart: the mirror's state from now on (a snapshot
      // may have come first, or may come later: either adds no band twice).
      if (lastBand(s) === 'down' && src.breaker) {
        s.bands.push({ state: src.breaker.state, from: now(), generation: src.breaker.generation });
        s.generation = Math.max(s.generation, src.breaker.generation);
      }
      // No snapshot yet (the event stream is not up): the mirror's state,
      // until a snapshot brings the history.
      if (s.bands.length === 0 && src.breaker) {
        s.bands.push({ state: src.breaker.state, from: windowStart(), generation: src.breaker.generation });
        s.generation = src.breaker.generation;
        s.provisional = true;
      }
    }
    const g = st.tiers && st.tiers.global;
    if (g) push(state.tiers.global, { t, ...g });
    const c = st.tiers && st.tiers.cluster;
    if (c) push(state.tiers.cluster, { t, cap: c.cap, in_use: c.held_here, waiting: c.waiting_here });
    const o = st.calls && st.calls.overhead;
    if (o) {
      if (state.prevOverhead && o.count >= state.prevOverhead.count) {
        const delta = o.buckets.map((n, i) => n - state.prevOverhead.buckets[i]);
        const total = o.count - state.prevOverhead.count;
        if (total > 0)
          push(state.overhead, { t, p50: quantile(0.5, o.bounds_s, delta, total), p99: quantile(0.99, o.bounds_s, delta, total), n: total });
      }
      state.prevOverhead = o;
    }
    scheduleRender();
  }


  async function poll() {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), POLL_TIMEOUT_MS);
    try {
      const res = await fetch('/status', { cache: 'no-store', credentials: 'same-origin', signal: abort.signal });
      if (res.status === 401) {
        setLink('offline', 'the admin key is needed: reload the page and sign in');
        return;
      }
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      const st = await res.json();
      if (typeof st.now_ms === 'number') state.offsetMs = st.now_ms - Date.now();
      onStatus(st, now());
      if (state.link !== 'live' && state.events && state.events.readyState === EventSource.OPEN) setLink('live');
      else if (state.link === 'offline') {
        // Reachable again: reconnect the event stream at once.
        setLink('reconnecting', 'the node answers again; reconnecting the event stream');
        connectEvents(true);
      }
    } catch (e) {
      if (state.downSince == null) state.downSince = Date.now();
      setLink('offline', `the node is unreachable since ${new Date(state.downSince).toLocaleTimeString('en-GB')}; retrying`);
    } finally {
      clearTimeout(timer);
      checkHeartbeat();
      setTimeout(poll, POLL_MS);
    }
  }

  // A stream that says nothing for three heartbeats is gone, even if no
  // error came (a silent network): open a new one.
  function checkHeartbeat() {
    if (state.link !== 'live' || !state.pingMs) return;
    const quiet = Date.now() - state.lastEventAt;
    if (quiet > 3 * state.pingMs + 2000) {
      setLink('reconnecting', `no heartbeat from the event stream for ${fmtMs(quiet)}`);
      connectEvents(true);
    }
  }

  // -- /events ----------------------------------------------------------------

  function connectEvents(now_) {
    clearTimeout(state.eventsTimer);
    if (state.events) state.events.close();
    const go = () => {
      const es = new EventSource('/events');
      state.events = es;
      es.addEventListener('open', () => {
        state.lastEventAt = Date.now();
        state.eventsRetryMs = RECONNECT_MIN_MS;
        state.downSince = null;
        setLink('live');
      });
      es.addEventListener('snapshot', (e) => handle(e, onSnapshot));
      es.addEventListener('breaker', (e) => handle(e, (t) => { applyTransition(t); scheduleRender(); }));
      es.addEventListener('verdict', (e) => handle(e, onVerdict));
      // An MCP server started, became ready or went: drawn from /status,
      // polled now rather than at the next tick.
      es.addEventListener('mcp_server', () => { state.lastEventAt = Date.now(); poll(); });
      es.addEventListener('ping', () => { state.lastEventAt = Date.now(); });
      es.addEventListener('error', () => {
        if (state.downSince == null) state.downSince = Date.now();
        if (es.readyState === EventSource.CLOSED) {
          // Refused (e.g. 503: too many subscribers): try again later.
          setLink('reconnecting', `the event stream was refused; retrying in ${fmtMs(state.eventsRetryMs)}`);
          state.eventsTimer = setTimeout(() => connectEvents(true), state.eventsRetryMs);
          state.eventsRetryMs = Math.min(RECONNECT_MAX_MS, state.eventsRetryMs * 2);
        } else if (state.link !== 'offline') {
          // (Offline: the poll already says the node is unreachable.)
          setLink('reconnecting', 'the event stream broke; reconnecting');
        }
      });
    };
    if (now_) go();
    else state.eventsTimer = setTimeout(go, 0);
  }

  function handle(e, fn) {
    state.lastEventAt = Date.now();
    let data;
    try {
      data = JSON.parse(e.data);
    } catch (_) {
      return; // not ours to crash on
    }
    fn(data);
  }

  function onVerdict(v) {
    state.verdicts.unshift(v);
    if (state.verdicts.length > MAX_VERDICTS) state.verdicts.length = MAX_VERDICTS;
    scheduleRender();
  }

  // Draws at most every RENDER_EVERY_MS: a flood of verdicts on a bad day
  // must not freeze the page (and make the node drop it as a slow reader).
  function scheduleRender() {
    if (state.renderTimer) return;
    state.renderTimer = setTimeout(() => {
      state.renderTimer = null;
      render();
    }, RENDER_EVERY_MS);
  }

  // -- the page ---------------------------------------------------------------

  function setLink(what, detail) {
    if (what !== 'live' && state.link === 'live') state.lastDown = now();
    state.link = what;
    const e = document.getElementById('link');
    e.dataset.state = what;
    e.textContent = what === 'live' ? 'live' : `${what}: ${detail || ''}`;
    if (what === 'live') state.downSince = null;
  }

  function showNotice(text) {
    const n = document.getElementById('notice');
    n.textContent = text;
    n.hidden = false;
  }

  function render() {
    renderSources();
    renderTiers();
    renderVerdicts();
    renderStall();
    renderOverhead();
    globalThis.sluicePanels.renderSpend(state.lastStatus);
    globalThis.sluicePanels.renderMcp(state.lastStatus);
    const st = state.lastStatus;
    document.getElementById('updated').textContent = st
      ? `${fmtCount(st.calls_in_flight)} calls in flight · ${fmtCount(st.connections)} connections · ${fmtClock(now())}`
      : '';
  }

  function renderSources() {
    const box = document.getElementById('sources');
    const cards = [];
    for (const s of state.sources.values()) {
      const current = s.bands.length ? s.bands[s.bands.length - 1].state : 'unknown';
      const rateLines = [];
      for (const [o, pts] of s.rates) if (pts.some((p) => p.v > 0)) rateLines.push({ name: o, cls: `o-${o}`, points: pts });
      cards.push(el('article', { class: 'source', 'data-source': s.name },
        el('h3', {},
          el('span', { text: s.name }),
          el('span', { class: `state ${current}`, 'data-state': current, text: current.replace('_', '-') }),
          s.health !== 'ok' ? el('span', { class: 'state broken', text: s.health }) : null,
          el('span', { class: 'muted', text: `generation ${s.generation}` })),
        bandsView(s),
        el('div', { class: 'axis-labels muted' }, el('span', { text: state.viewMs >= 60000 * 2 ? `−${state.viewMs / 60000} min` : `−${state.viewMs / 1000} s` }), el('span', { text: 'now' })),
        el('div', { class: 'pair' },
          el('div', {}, el('h4', { text: 'AIMD limit · in flight' }),
            lineChart([{ name: 'limit', cls: 'c-limit', points: s.limit }, { name: 'in flight', cls: 'c-use', points: s.inFlight }], fmtCount)),
          el('div', {}, el('h4', { text: 'attempts/s by outcome' }),
            rateLines.length ? lineChart(rateLines, fmtRate) : el('p', { class: 'muted', text: 'no attempts yet' })))));
    }
    box.replaceChildren(...cards);
  }

  function tierFigures(name, t) {
    const fig = (field, label, value) => el('span', { class: 'figure' },
      el('b', { 'data-tier': name, 'data-field': field, text: fmtCount(value) }), ` ${label}`);
    const fill = t.cap > 0 ? Math.min(1, t.in_use / t.cap) : 0;
    return el('div', { class: 'tier-figures' },
      fig('in_use', 'in use', t.in_use), fig('waiting', 'waiting', t.waiting), fig('cap', 'cap', t.cap),
      el('span', { class: 'meter', title: `${fmtPct(fill)} of the cap in use` },
        el('span', { class: 'meter-fill', style: { width: `${(fill * 100).toFixed(1)}%` } })));
  }

  function renderTiers() {
    const st = state.lastStatus;
    if (!st || !st.tiers) return;
    const parts = [];
    const last = (series) => series[series.length - 1];
    if (state.tiers.global.length) {
      parts.push(el('div', { class: 'tier', 'data-tier': 'global' }, el('h4', { text: 'global (this node)' }),
        tierFigures('global', last(state.tiers.global)),
        lineChart([{ name: 'in use', cls: 'c-use', points: state.tiers.global.map((p) => ({ t: p.t, v: p.in_use })) },
          { name: 'waiting', cls: 'c-wait', points: state.tiers.global.map((p) => ({ t: p.t, v: p.waiting })) }], fmtCount, 50)));
    }
    if (st.tiers.cluster && state.tiers.cluster.length) {
      const c = st.tiers.cluster;
      parts.push(el('div', { class: 'tier', 'data-tier': 'cluster' }, el('h4', { text: 'cluster (Redis): this node' }),
        tierFigures('cluster', last(state.tiers.cluster)),
        el('p', { class: 'muted', text: `${fmtCount(c.leases_lost)} leases lost · ${fmtCount(c.redis_errors)} Redis errors` }),
        lineChart([{ name: 'held here', cls: 'c-use', points: state.tiers.cluster.map((p) => ({ t: p.t, v: p.in_use })) },
          { name: 'waiting here', cls: 'c-wait', points: state.tiers.cluster.map((p) => ({ t: p.t, v: p.waiting })) }], fmtCount, 50)));
    }
    document.getElementById('tiers').replaceChildren(...parts);

    // The busiest sessions (by owner: a key's name or "anonymous"), keys
    // and connections (by number and key name).
    const rows = [];
    for (const [owner, s] of Object.entries(st.tiers.sessions || {}))
      rows.push({ kind: 'sessions', name: `${owner} (${fmtCount(s.sessions)})`, in_use: s.in_use, waiting: s.waiting, cap: null });
    for (const [name, k] of Object.entries(st.tiers.keys || {}))
      rows.push({ kind: 'key', name, in_use: k.in_use, waiting: k.waiting, cap: k.cap });
    for (const [id, c] of Object.entries(st.tiers.connections || {}))
      rows.push({ kind: 'connection', name: `#${id}${c.key ? ` · ${c.key}` : ''}`, in_use: c.in_use, waiting: c.waiting, cap: c.cap });
    rows.sort((a, b) => b.in_use + b.waiting - (a.in_use + a.waiting));
    const body = rows.slice(0, 8).map((r) => el('tr', { 'data-kind': r.kind },
      el('td', { text: r.kind }), el('td', { text: r.name }), el('td', { class: 'num', text: fmtCount(r.in_use) }),
      el('td', { class: 'num', text: fmtCount(r.waiting) }), el('td', { class: 'num', text: r.cap == null ? '–' : fmtCount(r.cap) })));
    document.getElementById('busiest').replaceChildren(el('h4', { text: 'busiest sessions, keys and connections' }),
      body.length ? el('table', {}, el('thead', {}, el('tr', {}, ...['tier', 'who', 'in use', 'waiting', 'cap'].map((h) => el('th', { text: h })))), el('tbody', {}, ...body))
        : el('p', { class: 'muted', text: 'no calls in flight' }));
  }

  function renderVerdicts() {
    const rows = state.verdicts.map((v) => {
      const what = v.reason || v.status;
      return el('tr', { 'data-status': v.status, 'data-verdict': what },
        el('td', { text: fmtClock(v.at_ms || now()) }),
        el('td', {}, el('span', { class: `verdict ${v.status}`, text: v.tier ? `${what} (${v.tier})` : what })),
        el('td', { text: v.route || '' }), el('td', { text: v.model || '–' }), el('td', { text: v.key || 'anonymous' }),
        el('td', { class: 'num', text: fmtCount(v.attempts) }), el('td', { class: 'num', text: fmtMs(v.elapsed_ms) }),
        el('td', { class: 'num', text: fmtMs(v.stalled_ms) }));
    });
    document.querySelector('#verdicts tbody').replaceChildren(...rows);
    document.getElementById('no-verdicts').hidden = rows.length > 0;
  }

  function renderStall() {
    const st = state.lastStatus;
    const slowest = (st && st.calls && st.calls.slowest) || {};
    const routes = [];
    for (const [route, calls] of Object.entries(slowest)) {
      if (!calls.length) continue;
      const max = Math.max(...calls.map((c) => c.elapsed_ms), 1);
      routes.push(el('div', { class: 'route', 'data-route': route }, el('h4', { text: route }),
        ...calls.map((c) => {
          const productive = Math.max(0, c.productive_ms);
          const stalled = Math.max(0, c.stalled_ms);
          const other = Math.max(0, c.elapsed_ms - productive - stalled);
          const seg = (cls, ms) => el('span', { class: `seg ${cls}`, style: { width: `${((ms / max) * 100).toFixed(2)}%` } });
          return el('div', { class: 'stall-row', title: `${c.status} at ${fmtClock(c.at_ms)}: productive ${fmtMs(productive)}, stalled ${fmtMs(stalled)}, other ${fmtMs(other)}` },
            el('span', { class: 'stall-label', text: `${fmtMs(c.elapsed_ms)} · ${c.status} · ${c.attempts} att.` }),
            el('span', { class: 'stall-bar' }, seg('productive', productive), seg('stalled', stalled), seg('other', other)));
        })));
    }
    document.getElementById('stall').replaceChildren(...(routes.length ? routes : [el('p', { class: 'muted', text: 'no calls yet' })]));
  }

  function renderOverhead() {
    const pts = state.overhead;
    const last = pts[pts.length - 1];
    document.getElementById('overhead').replaceChildren(
      el('p', {}, el('span', { class: 'figure' }, el('b', { 'data-overhead': 'p50', text: last ? fmtMs(last.p50 * 1000) : '–' }), ' p50 '),
        el('span', { class: 'figure' }, el('b', { 'data-overhead': 'p99', text: last ? fmtMs(last.p99 * 1000) : '–' }), ' p99 '),
        el('span', { class: 'muted', text: last ? `over ${fmtCount(last.n)} calls in the last ${POLL_MS / 1000} s` : 'no calls with attempts yet' })),
      lineChart([{ name: 'p50', cls: 'c-use', points: pts.map((p) => ({ t: p.t, v: p.p50 * 1000 })) },
        { name: 'p99', cls: 'c-wait', points: pts.map((p) => ({ t: p.t, v: p.p99 * 1000 })) }], fmtMs, 60));
  }

  // The charts' span: the last 10 minutes, or the last minute.
  function setupView() {
    const b = document.getElementById('view');
    const show = () => { b.textContent = `span: ${state.viewMs >= 120000 ? `${state.viewMs / 60000} min` : `${state.viewMs / 1000} s`}`; };
    show();
    b.addEventListener('click', () => {
      state.viewMs = VIEWS_MS[(VIEWS_MS.indexOf(state.viewMs) + 1) % VIEWS_MS.length];
      show();
      render();
    });
  }

  setupTheme();
  setupView();
  connectEvents(true);
  poll();
  // The bands and charts move with time even when nothing happens.
  setInterval(() => { renderSources(); renderOverhead(); }, 5000);
})();
