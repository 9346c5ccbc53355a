// contrib/grafana/sluice.json against a running sluice-node: every metric
// name the dashboard's queries use must be a family of the node's
// GET /metrics (a histogram's _bucket, _sum and _count included), and the
// file must be a dashboard Grafana can import (panels with queries, the
// datasource input).
//
//   node tests/js/grafana_metrics.mjs PATH_TO_SLUICE_NODE PATH_TO_SLUICE_JSON

import fs from 'node:fs';
import { withTimeout } from './checks.mjs';
import { startNode, waitHealthy } from './node_process.mjs';

const [nodeBinary, dashboardPath] = process.argv.slice(2);
if (!nodeBinary || !dashboardPath) {
  console.error('usage: node grafana_metrics.mjs PATH_TO_SLUICE_NODE PATH_TO_SLUICE_JSON');
  process.exit(64);
}

const problems = [];
const dashboard = JSON.parse(fs.readFileSync(dashboardPath, 'utf8'));
const queries = [];
(function walk(v) {
  if (Array.isArray(v)) v.forEach(walk);
  else if (v && typeof v === 'object')
    for (const [k, x] of Object.entries(v)) {
      if ((k === 'expr' || k === 'query') && typeof x === 'string') queries.push(x);
      else walk(x);
    }
})(dashboard);
const panels = (dashboard.panels || []).filter((p) => p.type !== 'row');
if (panels.length < 8) problems.push(`only ${panels.length} panels`);
for (const p of panels)
  if (!p.targets || p.targets.length === 0) problems.push(`panel "${p.title}" has no query`);
if (!(dashboard.__inputs || []).some((i) => i.pluginId === 'prometheus'))
  problems.push('no Prometheus datasource input');

const used = new Set();
for (const q of queries)
  for (const m of q.matchAll(/\b((?:sluice|process)_[a-z0-9_]+)\b/g)) used.add(m[1]);

const node = startNode(nodeBinary); // the embedded default config
let names = [];
try {
  const port = await withTimeout(node.port, 15_000, 'sluice-node did not report its port');
  await waitHealthy(port);
  // One call, so that the per-route and per-source families have samples.
  const call = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'sim-chat', messages: [{ role: 'user', content: 'hi' }] }),
  });
  if (call.status !== 200) problems.push(`the warm-up call answered ${call.status}`);
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const families = new Map(); // name -> type
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) families.set(m[1], m[2]);
  const exists = (name) => {
    if (families.has(name)) return true;
    const base = name.replace(/_(bucket|sum|count)$/, '');
    return base !== name && families.get(base) === 'histogram';
  };
  names = [...used].sort();
  for (const n of names) if (!exists(n)) problems.push(`${n} is not in /metrics`);
} finally {
  await node.stop();
}

if (names.length < 10) problems.push(`only ${names.length} metric names found in the queries`);
for (const p of problems) console.log(`FAIL ${p}`);
console.log(`${names.length} metric names checked in ${queries.length} queries: ${names.join(', ')}`);
process.exit(problems.length === 0 ? 0 : 1);
