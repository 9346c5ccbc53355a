// End-to-end test of the MCP gateway: the official TypeScript client
// (@modelcontextprotocol/sdk, Client + StreamableHTTPClientTransport) talks
// to sluice-node's /mcp, which runs two stdio servers as its children: the
// reference server @modelcontextprotocol/server-everything, and a small
// server of ours on the same SDK (mcp_test_server.mjs) that logs every call
// and cancellation it receives. One check connects the SDK's next major
// version (@modelcontextprotocol/client) too.
//
//   node tests/js/mcp_e2e.mjs PATH_TO_SLUICE_NODE
//
// Prints one PASS/FAIL line per check (with what the client saw), exits
// non-zero on any failure, always stops the node (and with it the servers).

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { check, expect, results, withTimeout } from './checks.mjs';
import { startNode, waitHealthy } from './node_process.mjs';
import {
  abortedCallCancelled, busyUnderSessionCap, longCallWithProgress, promptsAndResources, serversReady, stdioServersToml, status, text,
} from './mcp_checks.mjs';

const binary = process.argv[2];
if (!binary) {
  console.error('usage: node mcp_e2e.mjs PATH_TO_SLUICE_NODE');
  process.exit(2);
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-mcp-'));
const serverLog = path.join(dir, 'server.log');
const config = path.join(dir, 'sluice.toml');
const configText = `
[admission]
session_cap = 1
wait_timeout_s = 0.3

${stdioServersToml(serverLog)}`;
fs.writeFileSync(config, configText);

const logLines = () => (fs.existsSync(serverLog) ? fs.readFileSync(serverLog, 'utf8').split('\n') : []);



async function connect(port) {
  const client = new Client({ name: 'sluice-e2e', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`));
  await client.connect(transport);
  return { client, transport };
}


const node = startNode(binary, { config });
try {
  await withTimeout((async () => {
    const port = await node.port;
    await waitHealthy(port);
    await serversReady(port);
    const { client, transport } = await connect(port);

    await check('initialize: a session and a protocol revision the SDK speaks', async () => {
      expect(transport.sessionId, 'no Mcp-Session-Id');
      const v = client.getServerVersion();
      expect(v?.name === 'sluice', `server ${JSON.stringify(v)}`);
      return `session ${transport.sessionId.slice(0, 8)}..., server ${v.name}`;
    });

    await check('tools/list: both servers\' tools under their prefixes', async () => {
      const { tools } = await client.listTools();
      const names = tools.map((t) => t.name);
      for (const n of ['everything_echo', 'everything_get-sum', 'ours_slow_write', 'ours_slow_read'])
        expect(names.includes(n), `${n} missing from ${names.join(',')}`);
      const echo = tools.find((t) => t.name === 'everything_echo');
      expect(echo.annotations?.readOnlyHint === true, 'echo lost its annotations');
      return `${tools.length} tools`;
    });

    await check('tools/call echo and get-sum through the gateway', async () => {
      const e = await client.callTool({ name: 'everything_echo', arguments: { message: 'hi' } });
      expect(text(e).includes('hi'), `echo said ${text(e)}`);
      const s = await client.callTool({ name: 'everything_get-sum', arguments: { a: 2, b: 3 } });
      expect(text(s).includes('5'), `sum said ${text(s)}`);
      return `${JSON.stringify(text(e))}, ${JSON.stringify(text(s))}`;
    });

    await check('the SDK v2 client (@modelcontextprotocol/client) connects, lists and calls', async () => {
      // The SDK's next major version (separate packages, the 2026-07-28
      // revision among those it speaks): with its default connect it must
      // settle on a session revision the node speaks. It needs Node 20.
      if (Number(process.versions.node.split('.')[0]) < 20)
        return `not run: Node ${process.versions.node} (the v2 SDK needs 20)`;
      const v2 = await import('@modelcontextprotocol/client');
      const c2 = new v2.Client({ name: 'sluice-e2e-v2', version: '1.0.0' });
      const t2 = new v2.StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`));
      await c2.connect(t2);
      try {
        expect(t2.sessionId, 'no Mcp-Session-Id');
        const { tools } = await c2.listTools();
        expect(tools.some((t) => t.name === 'everything_echo'), `tools ${tools.length}`);
        const e = await c2.callTool({ name: 'everything_echo', arguments: { message: 'v2' } });
        expect(text(e).includes('v2'), `echo said ${text(e)}`);
        return `protocol ${t2.protocolVersion}, ${tools.length} tools, ${JSON.stringify(text(e))}`;
      } finally {
        await c2.close();
      }
    });

    await check('prompts and resources pass through (listed, got, read; templates routed)', () => promptsAndResources(client));

    await check('an unknown tool is a JSON-RPC error', async () => {
      try {
        await client.callTool({ name: 'everything_nope', arguments: {} });
      } catch (e) {
        expect(e.code === -32602, `code ${e.code}`);
        return `code ${e.code}: ${e.message}`;
      }
      throw new Error('no error');
    });

    await check('a long tool call with progress notifications relayed',
      () => longCallWithProgress(client));

    await check('tool_busy -32016 under a session cap of 1',
      () => busyUnderSessionCap(client, 200));

    await check('cancellation: the client aborts, the server sees notifications/cancelled', async () => {
      const before = (await status(port)).servers.find((s) => s.name === 'ours').cancels_sent;
      await abortedCallCancelled(client, logLines, 'cancel1');
      const after = (await status(port)).servers.find((s) => s.name === 'ours').cancels_sent;
      return `server logged the cancel; cancels_sent ${before} -> ${after}`;
    });

    // A server killed mid-call: a call that may have had effects fails and
    // is not sent again; a read-only one is retried on the restarted server.
    const killOurs = async () => {
      const s = (await status(port)).servers.find((x) => x.name === 'ours');
      process.kill(s.pid, 'SIGKILL');
      return s;
    };

    await check('a non-idempotent tool is never retried when its server dies', async () => {
      await sleep(1600); // the session's permit from the abort above is back
      const call = client.callTool({ name: 'ours_slow_write', arguments: { ms: 3000, tag: 'kill1' } });
      await sleep(500);
      const killed = await killOurs();
      let err = null;
      try { await call; } catch (e) { err = e; }
      expect(err, 'the call succeeded');
      await serversReady(port);
      const calls = logLines().filter((l) => l === 'call slow_write kill1').length;
      expect(calls === 1, `the server saw it ${calls} times`);
      const s = (await status(port)).servers.find((x) => x.name === 'ours');
      expect(s.restarts >= 1 && s.pid !== killed.pid, `status ${JSON.stringify(s)}`);
      return `error ${err.code} "${err.message}"; the server saw it once; restarted (restarts ${s.restarts})`;
    });

    await check('/metrics counts calls by tool and outcome; /events tells a server\'s restart', async () => {
      const m = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      const want = [
        /^sluice_mcp_calls_total\{server="everything",method="tools\/call",name="everything_echo",outcome="ok"\} [1-9]/m,
        /^sluice_mcp_calls_total\{server="ours",method="tools\/call",name="ours_slow_write",outcome="rpc_error"\} 1$/m,
        /^sluice_mcp_server_up\{server="everything"\} 1$/m,
        /^sluice_mcp_server_restarts_total\{server="ours"\} 1$/m,
        /^sluice_mcp_cancels_sent_total\{server="ours"\} 1$/m,
      ];
      for (const re of want) expect(re.test(m), `no ${re} in /metrics: ${m.split('\n').filter((l) => l.includes('mcp')).join(' | ')}`);
      // A restart seen on /events: the server goes (down), then is back.
      const ac = new AbortController();
      const events = await fetch(`http://127.0.0.1:${port}/events`, { signal: ac.signal });
      const reader = events.body.getReader();
      let seen = '';
      const got = (async () => {
        while (!/event: mcp_server\ndata: \{[^\n]*"state":"ready"/.test(seen.slice(seen.indexOf('"state":"down"')))) {
          const { value, done } = await reader.read();
          if (done) break;
          seen += Buffer.from(value).toString('utf8');
        }
      })();
      await sleep(300);
      await killOurs();
      await withTimeout(got, 10000, `no mcp_server events down then ready: ${seen.slice(-600)}`);
      ac.abort();
      await serversReady(port);
      const states = [...seen.matchAll(/event: mcp_server\ndata: (\{[^\n]*\})/g)].map((x) => JSON.parse(x[1]).state);
      return `calls by tool and outcome, up, restarts, cancels; /events: ${states.join(' -> ')}`;
    });

    await check('a read-only tool is retried on the restarted server', async () => {
      const call = client.callTool({ name: 'ours_slow_read', arguments: { ms: 1500, tag: 'kill2' } });
      await sleep(500);
      await killOurs();
      const r = await call;
      const calls = logLines().filter((l) => l === 'call slow_read kill2').length;
      expect(text(r).includes('kill2 done'), `result ${text(r)}`);
      expect(calls === 2, `the server saw it ${calls} times`);
      return `answered "${text(r)}" after ${calls} attempts`;
    });

    await check('hostile JSON-RPC: clear errors, nothing breaks', async () => {
      const post = async (body) => {
        const r = await fetch(`http://127.0.0.1:${port}/mcp`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream',
            'mcp-session-id': transport.sessionId },
          body,
        });
        const text = await r.text();
        return { status: r.status, body: text ? JSON.parse(text) : null };
      };
      const seen = [];
      const cases = [
        ['{"jsonrpc":"2.0","id":1,"method":', 400, -32700],
        ['[{"jsonrpc":"2.0","id":1,"method":"ping"}]', 400, -32600],
        [`{"jsonrpc":"2.0","id":"${'x'.repeat(300)}","method":"ping"}`, 400, -32600],
        ['{"jsonrpc":"1.0","id":1,"method":"ping"}', 400, -32600],
        [Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]), 400, -32700],
        ['{"jsonrpc":"2.0","id":7,"method":"completion/complete"}', 200, -32601],
        ['{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":5}}', 200, -32602],
      ];
      for (const [body, status, code] of cases) {
        const r = await post(body);
        expect(r.status === status && r.body?.error?.code === code,
          `${String(body).slice(0, 40)}: ${r.status} ${JSON.stringify(r.body).slice(0, 200)}`);
        seen.push(`${r.status}/${r.body.error.code}`);
      }
      const g = await fetch(`http://127.0.0.1:${port}/mcp`, { headers: { accept: 'text/event-stream' } });
      expect(g.status === 405, `GET: ${g.status}`);
      const e = await client.callTool({ name: 'everything_echo', arguments: { message: 'still here' } });
      expect(text(e).includes('still here'), 'the gateway did not answer after them');
      return `${seen.join(', ')}, GET 405`;
    });

    await check('the session ends with DELETE', async () => {
      await transport.terminateSession();
      const r = await fetch(`http://127.0.0.1:${port}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream',
          'mcp-session-id': 'not-a-session' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
      });
      expect(r.status === 404, `unknown session: ${r.status}`);
      return 'unknown session 404';
    });
    await client.close();

    // Reloads: a server taken out ends (once its calls did); put back, it
    // starts; a changed one is started again.
    const reload = async (text) => {
      fs.writeFileSync(config, text);
      const r = await fetch(`http://127.0.0.1:${port}/admin/reload`, { method: 'POST' });
      const body = await r.json();
      expect(r.status === 200 && body.reloaded, `reload: ${r.status} ${JSON.stringify(body)}`);
      return body;
    };
    const toolNames = async () => {
      const c = await connect(port);
      const { tools } = await c.client.listTools();
      await c.client.close();
      return tools.map((t) => t.name);
    };
    await check('a reload that takes a server out ends it; put back, it starts again', async () => {
      const before = (await status(port)).servers.find((x) => x.name === 'ours');
      const out = await reload(configText.slice(0, configText.indexOf('[mcp.servers.ours]')));
      expect(JSON.stringify(out.mcp_servers.removed) === '["ours"]', `reload said ${JSON.stringify(out.mcp_servers)}`);
      const deadline = Date.now() + 5000;
      while (!logLines().includes(`stdin closed ${before.pid}`) && Date.now() < deadline) await sleep(50);
      expect(logLines().includes(`stdin closed ${before.pid}`), `server ${before.pid} was not stopped: ${logLines().slice(-3).join('|')}`);
      const names = await toolNames();
      expect(!names.some((n) => n.startsWith('ours_')) && names.includes('everything_echo'), `tools ${names.join(',')}`);
      const back = await reload(configText);
      expect(JSON.stringify(back.mcp_servers.added) === '["ours"]', `reload said ${JSON.stringify(back.mcp_servers)}`);
      await serversReady(port);
      const again = await toolNames();
      expect(again.includes('ours_slow_read'), `tools ${again.join(',')}`);
      const changed = await reload(configText.replace('idle_timeout_s = 20', 'idle_timeout_s = 25'));
      expect(JSON.stringify(changed.mcp_servers.replaced) === '["everything"]', `reload said ${JSON.stringify(changed.mcp_servers)}`);
      await serversReady(port);
      const c = await connect(port);
      const e = await c.client.callTool({ name: 'everything_echo', arguments: { message: 'after reloads' } });
      await c.client.close();
      expect(text(e).includes('after reloads'), `echo said ${text(e)}`);
      return `removed: ${before.pid} stopped, ours_* gone; added back: ${again.length} tools; everything replaced, echo answers`;
    });
  })(), 120000, 'the MCP end-to-end test took over 120 s');
} catch (e) {
  results.failed++;
  console.log(`FAIL ${e.message}\n${node.output.slice(-4000)}`);
} finally {
  const exit = await node.stop();
  const left = logLines().filter((l) => l.startsWith('started ')).map((l) => Number(l.split(' ')[1]));
  // Running: exists and is no zombie (a child that exited after the node
  // did is reparented, and this machine's init may never reap it).
  const running = (pid) => {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
    } catch {
      return false;
    }
  };
  let alive = left.filter(running).length;
  for (let i = 0; i < 50 && alive > 0; i++) {
    await sleep(100);
    alive = left.filter(running).length;
  }
  await check('the node stopped and left no server running', async () => {
    expect(alive === 0, `${alive} of ${left.length} test servers still running`);
    // The last start of ours was still running: it was told to stop (its
    // stdin closed, as MCP's stdio shutdown begins), not only killed.
    const last = left[left.length - 1];
    const told = logLines().find((l) => l === `stdin closed ${last}` || l === `sigterm ${last}`);
    expect(told, `${last} logged no stop: ${logLines().slice(-4).join('|')}`);
    return `exit ${JSON.stringify(exit)}; ${left.length} servers started, none left; the last one logged "${told}"`;
  });
}
console.log(`${results.passed} passed, ${results.failed} failed`);
process.exit(results.failed === 0 ? 0 : 1);
