// The dashboard in a real browser: Debian's Chromium, headless, driven by
// playwright-core, against a sluice-node whose simulated primary fails for
// its first seconds and then recovers.
//
//   node tests/js/dashboard_e2e.mjs PATH_TO_SLUICE_NODE ARTIFACT_DIR
//
// Checks, in order: /dashboard needs the admin key (401 with a Basic
// challenge; Bearer and Basic both open it) and is served with a strict
// CSP; both sources appear; the primary's band shows open, then half_open,
// then closed; the global tier's in-use figure on the page equals /status's
// at the same moment; a tool_busy verdict appears after an overload burst;
// the page survives a node restart (says so, then is live again); dark mode
// renders; a second node on Redis shows its cluster tier as /status does.
// The page's scripts must log no console error (network errors while the
// node is down are the browser's, and expected). Screenshots go to
// ARTIFACT_DIR. Prints one line per check; exits non-zero on any failure.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { check, expect, results, until, withTimeout } from './checks.mjs';
import { startNode, waitHealthy } from './node_process.mjs';

const nodeBinary = process.argv[2];
const artifacts = process.argv[3] || path.join(os.tmpdir(), 'sluice-dashboard-artifacts');
if (!nodeBinary) {
  console.error('usage: node dashboard_e2e.mjs PATH_TO_SLUICE_NODE [ARTIFACT_DIR]');
  process.exit(64);
}
const CHROMIUM = process.env.SLUICE_CHROMIUM || '/usr/bin/chromium';
const ADMIN_KEY = 'dashboard-admin-key-0123456789';
const TEAM_KEY = 'dashboard-team-a-key-0123456789'; // a client key: calls need one
const OVERALL_TIMEOUT_MS = 150_000;
const FAIL_FOR_S = 5; // the primary's failing phase

// The primary fails every attempt for FAIL_FOR_S seconds from the node's
// start, then answers; "slow" holds calls in flight long enough to read a
// tier; the global cap is small so that a burst gets tool_busy.
const CONFIG = `
[node]
access_log = "off"
shutdown_grace_s = 1
events_ping_s = 2

[auth]
admin_key = "env:SLUICE_DASHBOARD_ADMIN_KEY"
  [auth.keys.team-a]
  key = "env:SLUICE_DASHBOARD_TEAM_KEY"
  tokens_per_minute = 10000000
  budget_usd_per_day = 1000

[admission]
session_cap = 64
connection_cap = 64
global_cap = 8
wait_timeout_s = 0.5

[sources.primary]
type = "simulated"
seed = 1
  [sources.primary.breaker]
  window_size = 10
  min_samples = 4
  failure_rate_threshold = 0.5
  open_duration_s = 2
  [[sources.primary.phases]]
  length_s = ${FAIL_FOR_S}
  latency_min_ms = 5
  latency_max_ms = 10
  transient_rate = 1.0
  [[sources.primary.phases]]
  latency_min_ms = 5
  latency_max_ms = 20

[sources.backup]
type = "simulated"
seed = 2
  [[sources.backup.phases]]
  latency_min_ms = 10
  latency_max_ms = 30

[sources.slow]
type = "simulated"
seed = 3
  [[sources.slow.phases]]
  latency_min_ms = 5000
  latency_max_ms = 5000

[mcp.servers.ours]
command = ${JSON.stringify(process.execPath)}
args = [${JSON.stringify(path.join(path.dirname(fileURLToPath(import.meta.url)), 'mcp_test_server.mjs'))}]

[routes."/v1/chat/completions"]
kind = "chat"
sources = ["primary", "backup"]
  [routes."/v1/chat/completions".models]
  "slow" = ["slow"]

[prices."any"]
input = 0.15
output = 0.60

[prices."slow"]
input = 0.15
output = 0.60
`;

// A node sharing its global tier through Redis (the cluster tier).
const CLUSTER_CONFIG = (redisPort) => `
[node]
access_log = "off"
shutdown_grace_s = 1

[backend]
type = "redis"
address = "127.0.0.1:${redisPort}"
cluster_global_cap = 2

[sources.slow]
type = "simulated"
  [[sources.slow.phases]]
  latency_min_ms = 5000
  latency_max_ms = 5000

[routes."/v1/chat/completions"]
kind = "chat"
sources = ["slow"]
`;

// -- traffic ------------------------------------------------------------------

function chat(port, model = 'any') {
  return fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${TEAM_KEY}` },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
  }).then(async (r) => ({ status: r.status, body: await r.text() }), (e) => ({ status: 0, body: e.message }));
}

// Calls at about `perSecond` until stopped; resolves when all are answered.
function steadyTraffic(port, perSecond) {
  let on = true;
  const pending = new Set();
  const loop = (async () => {
    while (on) {
      const p = chat(port);
      pending.add(p);
      p.finally(() => pending.delete(p));
      await sleep(1000 / perSecond);
    }
  })();
  return async () => {
    on = false;
    await loop;
    await Promise.all([...pending]);
  };
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// redis-server on a free port, no persistence; resolves when it answers.
async function startRedis() {
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '',
    '--appendonly', 'no', '--loglevel', 'warning'], { stdio: 'ignore' });
  const deadline = Date.now() + 10_000;
  for (;;) {
    const up = await new Promise((resolve) => {
      const c = net.connect(port, '127.0.0.1', () => { c.end(); resolve(true); });
      c.on('error', () => resolve(false));
    });
    if (up) break;
    if (Date.now() > deadline) throw new Error('redis-server did not start');
    await sleep(100);
  }
  return { port, stop: () => child.kill('SIGKILL') };
}

async function statusJson(port, key = ADMIN_KEY) {
  const r = await fetch(`http://127.0.0.1:${port}/status`, { headers: key ? { authorization: `Bearer ${key}` } : {} });
  expect(r.status === 200, `/status answered ${r.status}`);
  return r.json();
}

// -- the run ------------------------------------------------------------------

async function main() {
  fs.mkdirSync(artifacts, { recursive: true });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-dashboard-'));
  const configPath = path.join(dir, 'node.toml');
  fs.writeFileSync(configPath, CONFIG);
  const env = { SLUICE_DASHBOARD_ADMIN_KEY: ADMIN_KEY, SLUICE_DASHBOARD_TEAM_KEY: TEAM_KEY };

  let node = startNode(nodeBinary, { config: configPath, env });
  let browser = null;
  try {
    const port = await withTimeout(node.port, 15_000, 'sluice-node did not report its port');
    await waitHealthy(port);
    const base = `http://127.0.0.1:${port}`;
    const stopTraffic = steadyTraffic(port, 25);

    await check('GET /dashboard needs the admin key: 401 with a Basic challenge', async () => {
      const r = await fetch(`${base}/dashboard`);
      expect(r.status === 401, `status ${r.status}`);
      const challenge = r.headers.get('www-authenticate') || '';
      expect(/^Basic realm="sluice admin"/.test(challenge), `WWW-Authenticate ${challenge}`);
      const wrong = await fetch(`${base}/dashboard`, { headers: { authorization: `Basic ${Buffer.from('admin:nope').toString('base64')}` } });
      expect(wrong.status === 401, `a wrong password: ${wrong.status}`);
      return challenge;
    });

    await check('the page and its files are served with the key, under a strict CSP', async () => {
      const bearer = await fetch(`${base}/dashboard`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
      expect(bearer.status === 200, `Bearer: ${bearer.status}`);
      expect((bearer.headers.get('content-type') || '').startsWith('text/html'), `content-type ${bearer.headers.get('content-type')}`);
      const csp = bearer.headers.get('content-security-policy') || '';
      expect(csp.includes("script-src 'self'") && csp.includes("default-src 'none'"), `CSP ${csp}`);
      const html = await bearer.text();
      expect(!/https?:\/\/(?!127\.0\.0\.1)/.test(html.replace(/http:\/\/www\.w3\.org\/[^"']*/g, '')), 'the page refers to another host');
      const basic = { authorization: `Basic ${Buffer.from(`admin:${ADMIN_KEY}`).toString('base64')}` };
      for (const f of ['draw.js', 'app.js', 'app.css']) {
        const r = await fetch(`${base}/dashboard/${f}`, { headers: basic });
        expect(r.status === 200, `${f}: ${r.status}`);
        const text = await r.text();
        expect(!/https?:\/\/(?!www\.w3\.org\/2000\/svg)/.test(text), `${f} refers to another host`);
      }
      const missing = await fetch(`${base}/dashboard/nope.js`, { headers: basic });
      expect(missing.status === 404, `a missing file: ${missing.status}`);
      const slash = await fetch(`${base}/dashboard/`, { headers: basic, redirect: 'manual' });
      expect(slash.status === 308 && slash.headers.get('location') === '/dashboard',
        `/dashboard/: ${slash.status} to ${slash.headers.get('location')}`);
      // The browser's cached credentials read; they never act.
      const act = await fetch(`${base}/admin/breakers/primary/reset`, { method: 'POST', headers: basic });
      expect(act.status === 401, `Basic on /admin/: ${act.status}`);
      return csp;
    });

    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
        '--disable-component-update', '--disable-sync'],
    });
    const context = await browser.newContext({
      viewport: { width: 1280, height: 800 },
      httpCredentials: { username: 'admin', password: ADMIN_KEY },
    });
    const page = await context.newPage();
    // Console errors: the page's own are failures; network errors while the
    // node is down (restart window) are the browser's.
    const consoleErrors = [];
    let restartWindow = false;
    page.on('console', (m) => {
      if (m.type() !== 'error') return;
      const text = m.text();
      if (restartWindow && /net::ERR_|Failed to load resource|EventSource/.test(text)) return;
      consoleErrors.push(text);
    });
    page.on('pageerror', (e) => consoleErrors.push(`uncaught: ${e.message}`));
    const shot = (name) => page.screenshot({ path: path.join(artifacts, `${name}.png`), fullPage: false });

    await page.goto(`${base}/dashboard`);

    await check('the span switches to the last minute', async () => {
      await page.click('#view');
      const label = await page.textContent('#view');
      expect(label === 'span: 60 s', `the button says ${label}`);
      return label;
    });

    await check('both sources appear', async () => {
      await until(() => page.evaluate(() => document.querySelectorAll('article.source').length >= 3), 10_000,
        'the sources did not appear');
      const names = await page.$$eval('article.source', (a) => a.map((e) => e.dataset.source));
      expect(names.includes('primary') && names.includes('backup'), `sources ${names}`);
      return names.join(', ');
    });

    const bandStates = () => page.$$eval('svg.bands[data-source="primary"] rect', (r) => r.map((e) => e.dataset.state));
    let openAt;
    await check("the primary's band shows open while it fails", async () => {
      const states = await until(async () => {
        const s = await bandStates();
        return s.includes('open') ? s : null;
      }, (FAIL_FOR_S + 3) * 1000, 'no open band');
      openAt = Date.now();
      await shot('breaker-open');
      return states.join(' → ');
    });

    await check('then half_open, then closed once the primary recovers', async () => {
      const states = await until(async () => {
        const s = await bandStates();
        const o = s.indexOf('open');
        const h = s.indexOf('half_open', o);
        const c = s.lastIndexOf('closed');
        return o >= 0 && h > o && c > h ? s : null;
      }, (FAIL_FOR_S + 12) * 1000, `no open → half_open → closed (bands ${await bandStates()})`);
      const badge = await page.textContent('article.source[data-source="primary"] .state');
      expect(badge === 'closed', `the badge says ${badge}`);
      await shot('breaker-recovered');
      return `${states.join(' → ')}, ${((Date.now() - openAt) / 1000).toFixed(1)} s after open was seen`;
    });

    await check('a band tells its transition time and generation on hover', async () => {
      const title = await page.$eval('svg.bands[data-source="primary"] rect[data-state="half_open"] title', (t) => t.textContent);
      expect(/^half_open from \d\d:\d\d:\d\d for .* · generation \d+$/.test(title), `title ${title}`);
      return title;
    });

    await stopTraffic();

    await check("the global tier's in-use figure matches /status", async () => {
      const held = [chat(port, 'slow'), chat(port, 'slow'), chat(port, 'slow')];
      const shown = await until(async () => {
        const v = await page.textContent('[data-tier="global"][data-field="in_use"]');
        return v === '3' ? v : null;
      }, 4_000, 'the page never showed 3 in use');
      const st = await statusJson(port);
      const onPage = await page.textContent('[data-tier="global"][data-field="in_use"]');
      expect(st.tiers.global.in_use === 3 && onPage === '3', `/status ${st.tiers.global.in_use}, page ${onPage}`);
      // The busiest list names the key (its session tier) and the
      // connections by it, never a session id.
      const who = await page.$$eval('#busiest tbody tr', (r) => r.map((e) => e.textContent));
      expect(who.some((t) => t.startsWith('keyteam-a3')), `busiest: ${who.join(' | ')}`);
      expect(who.some((t) => /^connection#\d+ · team-a1/.test(t)), `busiest: ${who.join(' | ')}`);
      await shot('tiers');
      await Promise.all(held);
      return `page ${shown}, /status ${st.tiers.global.in_use}`;
    });

    await check("the key's tokens and spend show against its limits", async () => {
      const shown = await until(async () => {
        const v = await page.textContent('[data-spend="team-a"][data-field="tokens_per_minute"]').catch(() => null);
        return v && v !== '0' ? v : null;
      }, 5_000, 'no tokens per minute for team-a');
      const st = await statusJson(port);
      const k = st.spend.keys['team-a'];
      expect(k.tokens_per_minute.limit === 10000000, `limit ${k.tokens_per_minute.limit}`);
      expect(k.tokens_per_minute.used > 0, `used ${k.tokens_per_minute.used}`);
      const spent = await page.textContent('[data-spend="team-a"][data-field="budget_usd_per_day"]');
      expect(/^\$\d+\.\d{4}$/.test(spent), `spent ${spent}`);
      const row = await page.textContent('#spend tbody tr[data-kind="key"]');
      expect(row.includes('key team-a') && row.includes('of 10,000,000') && row.includes('of $1000.00'), `row ${row}`);
      expect(!(await page.textContent('#spend')).includes('null'), 'the panel shows "null"');
      return `page ${shown} tokens this minute, ${spent} today; /status ${k.tokens_per_minute.used}`;
    });

    await check('the MCP server appears, ready, with its tools and restarts', async () => {
      const row = await until(() => page.$('#mcp tbody tr[data-mcp="ours"][data-state="ready"]'), 15_000,
        'no ready row for the MCP server "ours"');
      const tools = await page.textContent('#mcp tr[data-mcp="ours"] [data-field="tools"]');
      const st = await statusJson(port);
      const s = st.mcp.servers.find((x) => x.name === 'ours');
      expect(tools === '2' && s.tools === 2, `page ${tools}, /status ${s.tools}`);
      // Killed: the row goes down or straight back to ready with a restart.
      process.kill(s.pid, 'SIGKILL');
      await until(async () => (await page.textContent('#mcp tr[data-mcp="ours"] [data-field="restarts"]')) === '1',
        10_000, 'the restart never showed');
      const after = (await statusJson(port)).mcp.servers.find((x) => x.name === 'ours');
      await shot('mcp');
      return `ready, ${tools} tools; killed pid ${s.pid}: restarts ${after.restarts}, last gone ${JSON.stringify(after.last_exit)}`;
    });

    await check('a tool_busy verdict appears after an overload burst', async () => {
      const burst = await Promise.all(Array.from({ length: 20 }, () => chat(port, 'slow')));
      const busy = burst.filter((r) => r.status === 503 && r.body.includes('tool_busy')).length;
      expect(busy > 0, `no tool_busy in the burst (${burst.map((r) => r.status)})`);
      await until(() => page.$('#verdicts tbody tr[data-status="tool_busy"]'), 5_000, 'no tool_busy row');
      const row = await page.textContent('#verdicts tbody tr[data-status="tool_busy"]');
      expect(row.includes('/v1/chat/completions') && row.includes('slow') && row.includes('team-a'), `row ${row}`);
      await shot('tool-busy');
      return `${busy} of 20 answered tool_busy; row: ${row}`;
    });

    await check('the stall-budget bars and the overhead figures show', async () => {
      const rows = await page.$$eval('#stall .stall-row', (r) => r.length);
      expect(rows > 0, 'no stall rows');
      const p50 = await until(async () => {
        const v = await page.textContent('[data-overhead="p50"]');
        return v && v !== '–' ? v : null;
      }, 5_000, 'no overhead p50');
      await page.screenshot({ path: path.join(artifacts, 'overview.png'), fullPage: true });
      return `${rows} calls drawn, overhead p50 ${p50}`;
    });

    await check('the page survives a node restart and says so', async () => {
      restartWindow = true;
      await node.stop();
      await until(async () => (await page.getAttribute('#link', 'data-state')) !== 'live', 8_000,
        'the page still says live with the node down');
      const down = await page.textContent('#link');
      await shot('node-down');
      node = startNode(nodeBinary, { config: configPath, env, port });
      await withTimeout(node.port, 15_000, 'the restarted node did not report its port');
      await until(async () => (await page.getAttribute('#link', 'data-state')) === 'live', 20_000,
        'the page did not go live again');
      await until(() => page.isVisible('#notice'), 5_000, 'no restart notice');
      const notice = await page.textContent('#notice');
      expect(/restarted/.test(notice), `notice ${notice}`);
      // Known by the process's start time, not by a generation going back:
      // the backup's breaker never moved, and still shows the gap.
      await until(() => page.$('svg.bands[data-source="backup"] rect[data-state="down"]'), 5_000,
        'no down band on the backup');
      // ...and then its state again, from the new process.
      await until(async () => (await page.textContent('article.source[data-source="backup"] .state')) === 'closed',
        5_000, 'the backup does not show closed again after the restart');
      restartWindow = false;
      // Fresh data after the restart: the poll still feeds the tier figure.
      await until(async () => (await page.textContent('[data-tier="global"][data-field="in_use"]')) === '0', 5_000,
        'no tier figure after the restart');
      await shot('after-restart');
      return `down: "${down}"; ${notice}`;
    });

    await check('dark mode renders with its own colours', async () => {
      await page.emulateMedia({ colorScheme: 'dark' });
      const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
      expect(bg === 'rgb(17, 21, 28)', `background ${bg}`);
      await shot('dark');
      await page.click('#theme'); // auto -> light
      const light = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
      expect(light === 'rgb(247, 248, 250)', `light background ${light}`);
      return `${bg}, then ${light} forced`;
    });

    await check('the cluster tier (Redis) shows what /status says', async () => {
      const redis = await startRedis();
      const clusterConfig = path.join(dir, 'cluster.toml');
      fs.writeFileSync(clusterConfig, CLUSTER_CONFIG(redis.port));
      const other = startNode(nodeBinary, { config: clusterConfig });
      try {
        const p = await withTimeout(other.port, 15_000, 'the cluster node did not report its port');
        await waitHealthy(p);
        const tab = await context.newPage();
        tab.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(`cluster page: ${m.text()}`); });
        tab.on('pageerror', (e) => consoleErrors.push(`cluster page, uncaught: ${e.message}`));
        await tab.goto(`http://127.0.0.1:${p}/dashboard`);
        const send = () => fetch(`http://127.0.0.1:${p}/v1/chat/completions`, {
          method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"messages":[]}',
        }).then((r) => r.text());
        const held = [send(), send()];
        const shown = await until(async () => {
          const v = await tab.textContent('[data-tier="cluster"][data-field="in_use"]').catch(() => null);
          return v === '2' ? v : null;
        }, 5_000, 'the page never showed 2 cluster leases held');
        const st = await statusJson(p, null);
        const cap = await tab.textContent('[data-tier="cluster"][data-field="cap"]');
        expect(st.tiers.cluster.held_here === 2 && st.tiers.cluster.cap === 2 && cap === '2',
          `/status ${JSON.stringify(st.tiers.cluster)}, page in use ${shown}, cap ${cap}`);
        await tab.screenshot({ path: path.join(artifacts, 'cluster.png') });
        await tab.close();
        await Promise.all(held);
        return `page ${shown} of ${cap}, /status held_here ${st.tiers.cluster.held_here}`;
      } finally {
        await other.stop();
        redis.stop();
      }
    });

    await check('the page logged no console error', async () => {
      expect(consoleErrors.length === 0, consoleErrors.join(' | '));
    });
  } finally {
    if (browser) await browser.close().catch(() => {});
    await node.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

try {
  await withTimeout(main(), OVERALL_TIMEOUT_MS, `the run took over ${OVERALL_TIMEOUT_MS / 1000} s`);
} catch (e) {
  results.failed++;
  console.log(`FAIL run: ${e?.stack ?? e}`);
}
console.log(`${results.passed} passed, ${results.failed} failed; screenshots in ${artifacts}`);
process.exit(results.failed === 0 ? 0 : 1);
