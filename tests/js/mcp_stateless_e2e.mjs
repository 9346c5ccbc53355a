// End-to-end test of /mcp in MCP revision 2026-07-28 (no initialize, no
// session: each request carries its revision in `_meta`): the official
// client of the SDK's next major version (@modelcontextprotocol/client,
// pinned to 2026-07-28, and in 'auto' mode) through sluice-node to two stdio
// servers the node runs: the reference server-everything and ours
// (mcp_test_server.mjs, which logs calls and cancellations). The session
// revisions stay on the same endpoint (a v1 client alongside), and raw
// requests check the refusals: a header that says another tool than the
// body, no `_meta`, a revision not served, an unknown method.
//
//   node tests/js/mcp_stateless_e2e.mjs PATH_TO_SLUICE_NODE
//
// Prints one PASS/FAIL line per check; exits non-zero on any failure. The
// v2 client needs Node 20: under an older Node it prints why and passes.

import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { check, expect, results, withTimeout } from './checks.mjs';
import { startNode, waitHealthy } from './node_process.mjs';
import {
  abortedCallCancelled, busyUnderSessionCap, longCallWithProgress, promptsAndResources, serversReady, stdioServersToml, text,
} from './mcp_checks.mjs';

const binary = process.argv[2];
if (!binary) {
  console.error('usage: node mcp_stateless_e2e.mjs PATH_TO_SLUICE_NODE');
  process.exit(2);
}
if (Number(process.versions.node.split('.')[0]) < 20) {
  console.log(`not run: Node ${process.versions.node} (@modelcontextprotocol/client needs 20)`);
  process.exit(0);
}
const v2 = await import('@modelcontextprotocol/client');
const v1 = await import('@modelcontextprotocol/sdk/client/index.js');
const v1http = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-mcp-2026-'));
const serverLog = path.join(dir, 'server.log');
const config = path.join(dir, 'sluice.toml');
const key = 'sk-stateless-e2e-0123456789';
const adminKey = 'admin-stateless-e2e-0123456789';
const admin = { Authorization: `Bearer ${adminKey}` };
// No session in 2026-07-28: the key is the session tier (max_concurrent 1).
fs.writeFileSync(config, `
[admission]
wait_timeout_s = 0.3

[auth]
admin_key = "env:SLUICE_MCP_ADMIN_KEY"

[auth.keys.agent]
key = "env:SLUICE_MCP_KEY"
max_concurrent = 1

${stdioServersToml(serverLog)}`);
const logLines = () => (fs.existsSync(serverLog) ? fs.readFileSync(serverLog, 'utf8').split('\n') : []);
const auth = { Authorization: `Bearer ${key}` };

async function connect(port, mode) {
  const client = new v2.Client({ name: 'sluice-e2e-2026', version: '1.0.0' },
    { versionNegotiation: { mode } });
  const transport = new v2.StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`),
    { requestInit: { headers: auth } });
  await client.connect(transport);
  return { client, transport };
}

// One raw POST to /mcp: its status and JSON body.
async function post(port, body, headers = {}) {
  const r = await fetch(`http://127.0.0.1:${port}/mcp`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json', accept: 'application/json, text/event-stream', ...auth, ...headers,
    },
    body: JSON.stringify(body),
  });
  const t = await r.text();
  let json = null;
  try { json = JSON.parse(t); } catch { /* not JSON */ }
  return { status: r.status, json, text: t };
}

// One raw HTTP request (fetch would join repeated headers into one): its
// status line and body.
function rawPost(port, body, headerLines) {
  return new Promise((resolve, reject) => {
    const text = JSON.stringify(body);
    const s = net.connect(port, '127.0.0.1', () => s.write(
      `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n${headerLines.join('\r\n')}\r\n` +
      `Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n` +
      `Authorization: Bearer ${key}\r\nContent-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`));
    let got = '';
    s.on('data', (d) => { got += d; });
    s.on('end', () => resolve({ status: Number(got.split(' ')[1]), body: got.slice(got.indexOf('\r\n\r\n') + 4) }));
    s.on('error', reject);
  });
}

const envelope = (version = '2026-07-28') => ({
  'io.modelcontextprotocol/protocolVersion': version,
  'io.modelcontextprotocol/clientCapabilities': {},
});

const node = startNode(binary, { config, env: { SLUICE_MCP_KEY: key, SLUICE_MCP_ADMIN_KEY: adminKey } });
try {
  await withTimeout((async () => {
    const port = await node.port;
    await waitHealthy(port);
    await serversReady(port, 20000, admin);
    const { client, transport } = await connect(port, { pin: '2026-07-28' });

    await check('pinned to 2026-07-28: server/discover answered, no session', async () => {
      expect(transport.protocolVersion === '2026-07-28', `protocol ${transport.protocolVersion}`);
      expect(!transport.sessionId, `a session: ${transport.sessionId}`);
      const v = client.getServerVersion();
      expect(v?.name === 'sluice', `server ${JSON.stringify(v)}`);
      return `protocol ${transport.protocolVersion}, server ${v.name}, no Mcp-Session-Id`;
    });

    await check('2026-07-28: tools/list merges both servers, calls go through', async () => {
      const { tools } = await client.listTools();
      const names = tools.map((t) => t.name);
      for (const n of ['everything_echo', 'everything_get-sum', 'ours_slow_write', 'ours_slow_read'])
        expect(names.includes(n), `${n} missing from ${names.join(',')}`);
      const e = await client.callTool({ name: 'everything_echo', arguments: { message: 'stateless' } });
      expect(text(e).includes('stateless'), `echo said ${text(e)}`);
      const s = await client.callTool({ name: 'everything_get-sum', arguments: { a: 40, b: 2 } });
      expect(text(s).includes('42'), `sum said ${text(s)}`);
      return `${tools.length} tools; ${JSON.stringify(text(e))}, ${JSON.stringify(text(s))}`;
    });

    await check('2026-07-28: prompts and resources pass through', () => promptsAndResources(client, -32602));

    await check('2026-07-28: a long call\'s progress comes on its own stream', () => longCallWithProgress(client, true));

    await check('2026-07-28: tool_busy -32016 with the key as the session tier', () => busyUnderSessionCap(client, 300));

    await check('2026-07-28: closing the stream cancels: the server sees notifications/cancelled', async () => {
      await sleep(1600); // the key's one permit is back
      await abortedCallCancelled(client, logLines, 'cancel26', true);
      return 'the client closed its stream; the server logged the cancel';
    });

    await check('2026-07-28 in auto mode, and a v1 client with a session, on the same /mcp', async () => {
      await sleep(300);
      const auto = await connect(port, 'auto');
      const old = new v1.Client({ name: 'sluice-e2e-v1', version: '1.0.0' });
      const oldT = new v1http.StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`),
        { requestInit: { headers: auth } });
      await old.connect(oldT);
      try {
        expect(auto.transport.protocolVersion === '2026-07-28', `auto: ${auto.transport.protocolVersion}`);
        expect(oldT.sessionId, 'the v1 client has no session');
        const a = await auto.client.callTool({ name: 'everything_echo', arguments: { message: 'auto' } });
        const b = await old.callTool({ name: 'everything_echo', arguments: { message: 'v1' } });
        expect(text(a).includes('auto') && text(b).includes('v1'), `${text(a)} / ${text(b)}`);
        return `auto settled on ${auto.transport.protocolVersion}; v1 on session ${oldT.sessionId.slice(0, 8)}...`;
      } finally {
        await auto.client.close();
        await old.close();
      }
    });

    await check('2026-07-28 refusals: a header that names another tool, no _meta, a revision not served, an unknown method', async () => {
      const call = (name, headers) => post(port, {
        jsonrpc: '2.0', id: 7, method: 'tools/call',
        params: { name, arguments: { message: 'x' }, _meta: envelope() },
      }, { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', ...headers });
      // A proxy in front allows everything_echo by its header; the body asks for another tool.
      const smuggled = await call('ours_slow_write', { 'mcp-name': 'everything_echo' });
      expect(smuggled.status === 400 && smuggled.json?.error?.code === -32020, `smuggled: ${smuggled.status} ${smuggled.text}`);
      expect(!logLines().some((l) => l.includes('call slow_write') && l.includes('undefined')), 'the server got it');
      // An empty Mcp-Session-Id does not take it to the session path, which
      // checks less; nor does a second Mcp-Name a proxy may read instead.
      const withSession = await call('ours_slow_write', { 'mcp-name': 'everything_echo', 'mcp-session-id': '' });
      expect(withSession.status === 400 && withSession.json?.error?.code === -32020,
        `with an empty session: ${withSession.status} ${withSession.text}`);
      const twice = await rawPost(port, {
        jsonrpc: '2.0', id: 11, method: 'tools/call',
        params: { name: 'everything_echo', arguments: { message: 'x' }, _meta: envelope() },
      }, ['MCP-Protocol-Version: 2026-07-28', 'Mcp-Method: tools/call', 'Mcp-Name: everything_echo',
        'Mcp-Name: ours_slow_write']);
      expect(twice.status === 400 && JSON.parse(twice.body).error?.code === -32020, `twice: ${twice.status} ${twice.body}`);
      // Base64 per the spec is read.
      const encoded = await call('everything_echo', { 'mcp-name': `=?base64?${Buffer.from('everything_echo').toString('base64')}?=` });
      expect(encoded.status === 200 && encoded.json?.result?.resultType === 'complete', `encoded: ${encoded.status} ${encoded.text}`);
      const bare = await post(port, { jsonrpc: '2.0', id: 8, method: 'tools/list', params: {} },
        { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/list' });
      expect(bare.status === 400 && bare.json?.error?.code === -32602, `no _meta: ${bare.status} ${bare.text}`);
      const future = await post(port, { jsonrpc: '2.0', id: 9, method: 'tools/list', params: { _meta: envelope('2099-01-01') } },
        { 'mcp-protocol-version': '2099-01-01', 'mcp-method': 'tools/list' });
      expect(future.status === 400 && future.json?.error?.code === -32022 &&
        JSON.stringify(future.json.error.data?.supported) === '["2026-07-28"]', `future: ${future.status} ${future.text}`);
      const unknown = await post(port, { jsonrpc: '2.0', id: 10, method: 'tasks/list', params: { _meta: envelope() } },
        { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tasks/list' });
      expect(unknown.status === 404 && unknown.json?.error?.code === -32601, `unknown: ${unknown.status} ${unknown.text}`);
      return `-32020 (${smuggled.json.error.message}; also with an empty Mcp-Session-Id; ` +
        `${JSON.parse(twice.body).error.message}); base64 name read; -32602; -32022 supported ${JSON.stringify(future.json.error.data.supported)}; 404 -32601`;
    });

    await check('2026-07-28: /metrics counts the calls by tool and outcome', async () => {
      const m = await (await fetch(`http://127.0.0.1:${port}/metrics`, { headers: admin })).text();
      const line = m.split('\n').find((l) => l.startsWith('sluice_mcp_calls_total') && l.includes('name="everything_echo"')
        && l.includes('outcome="ok"'));
      expect(line, 'no sluice_mcp_calls_total line for everything_echo ok');
      return line;
    });
    await client.close();
  })(), 120000, 'the MCP 2026-07-28 end-to-end test took over 120 s');
} catch (e) {
  results.failed++;
  console.log(`FAIL ${e.message}\n${node.output.slice(-4000)}`);
} finally {
  await node.stop();
}
console.log(`${results.passed} passed, ${results.failed} failed`);
process.exit(results.failed === 0 ? 0 : 1);
