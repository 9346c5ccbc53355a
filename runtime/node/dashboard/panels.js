// The Sluice node's dashboard: the panels drawn from one /status answer
// alone (tokens and spend, MCP servers), apart from the feeds' state in
// app.js, which calls them on each render. Every text goes through
// textContent, never HTML.
'use strict';

globalThis.sluicePanels = (() => {
  const { fmtCount, fmtPct, el } = globalThis.sluiceDraw;

  // Tokens and spend (SPEC §12): each key's and route's limits, what was
  // used or spent against them, a meter each.
  function renderSpend(st) {
    const spend = st && st.spend;
    if (!spend) return;
    const limitCell = (who, field, used, limit, fmt) => {
      if (limit == null) return el('td', { class: 'num muted', text: '–' });
      const fill = limit > 0 ? Math.min(1, used / limit) : 0;
      return el('td', { class: 'num', title: `${fmtPct(fill)} of the limit` },
        el('b', { 'data-spend': who, 'data-field': field, text: fmt(used) }),
        el('span', { class: 'muted of', text: ` of ${fmt(limit)}` }),
        el('span', { class: 'meter' },
          el('span', { class: 'meter-fill', style: { width: `${(fill * 100).toFixed(1)}%` } })));
    };
    // Cents hide a small spend: four decimals below $10.
    const usd = (v) => `$${Number(v).toFixed(Math.abs(v) < 10 ? 4 : 2)}`;
    const row = (kind, name, s) => el('tr', { 'data-kind': kind, title: `${fmtCount(s.tokens_in_flight)} tokens reserved by calls in flight` },
      el('td', { text: `${kind} ${name}` }),
      limitCell(name, 'tokens_per_minute', s.tokens_per_minute && s.tokens_per_minute.used, s.tokens_per_minute && s.tokens_per_minute.limit, fmtCount),
      limitCell(name, 'tokens_per_day', s.tokens_per_day && s.tokens_per_day.used, s.tokens_per_day && s.tokens_per_day.limit, fmtCount),
      limitCell(name, 'budget_usd_per_day', s.budget_usd_per_day && s.budget_usd_per_day.spent, s.budget_usd_per_day && s.budget_usd_per_day.limit, usd),
      limitCell(name, 'budget_usd_per_month', s.budget_usd_per_month && s.budget_usd_per_month.spent, s.budget_usd_per_month && s.budget_usd_per_month.limit, usd));
    const rows = [];
    for (const [name, s] of Object.entries(spend.keys || {})) rows.push(row('key', name, s));
    for (const [name, s] of Object.entries(spend.routes || {})) rows.push(row('route', name, s));
    const shared = spend.shared
      ? el('p', { class: 'muted', text: `counted in Redis${spend.shared.down ? ' (down: ' + spend.shared.when_down + ')' : ''} · ${fmtCount(spend.shared.held_here)} reservations held here · ${fmtCount(spend.shared.errors)} Redis errors` })
      : null;
    const parts = [rows.length ? el('table', {}, el('thead', {}, el('tr', {}, ...['scope', 'tokens / min', 'tokens / day', 'spent today', 'this month'].map((h) => el('th', { text: h })))), el('tbody', {}, ...rows))
      : el('p', { class: 'muted', text: 'no token limits or budgets set' })];
    if (shared) parts.push(shared);
    document.getElementById('spend').replaceChildren(...parts);
  }

  // MCP servers (SPEC §13): each upstream tool server's state, process,
  // restarts and lists; its breaker and tiers are a source's ("mcp:NAME").
  function renderMcp(st) {
    const mcp = st && st.mcp;
    const panel = document.getElementById('mcp-panel');
    const servers = (mcp && mcp.servers) || [];
    panel.hidden = servers.length === 0;
    if (!servers.length) return;
    const rows = servers.map((s) => el('tr', { 'data-mcp': s.name, 'data-state': s.state, title: s.last_exit ? `last gone: ${s.last_exit}` : '' },
      el('td', { text: s.name }),
      el('td', {}, el('span', { class: `mcp-state ${s.state}`, text: s.state })),
      el('td', { class: 'num', text: s.pid == null ? '–' : String(s.pid) }),
      el('td', { class: 'num', 'data-field': 'restarts', text: fmtCount(s.restarts) }),
      el('td', { class: 'num', 'data-field': 'tools', text: fmtCount(s.tools) }),
      el('td', { class: 'num', text: `${fmtCount(s.prompts)} / ${fmtCount(s.resources)}` }),
      el('td', { class: 'num', 'data-field': 'calls', text: fmtCount(s.calls) }),
      el('td', { class: 'num', text: fmtCount(s.cancels_sent) }),
      el('td', { class: 'num', text: fmtCount(s.bad_lines) }),
      el('td', { class: 'muted', text: s.last_exit || '' })));
    document.getElementById('mcp').replaceChildren(
      el('table', {}, el('thead', {}, el('tr', {}, ...['server', 'state', 'pid', 'restarts', 'tools', 'prompts / resources', 'calls', 'cancels sent', 'bad messages', 'last gone'].map((h) => el('th', { text: h })))),
        el('tbody', {}, ...rows)),
      el('p', { class: 'muted', text: `${fmtCount(mcp.sessions)} MCP sessions open` }));
  }

  return { renderSpend, renderMcp };
})();
