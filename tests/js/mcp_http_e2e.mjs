// End-to-end test of the MCP gateway with its upstream servers over
// Streamable HTTP: the official TypeScript client (@modelcontextprotocol/sdk,
// Client + StreamableHTTPClientTransport) talks to sluice-node's /mcp, which
// reaches two servers the test runs itself: the reference server
// @modelcontextprotocol/server-everything in its `streamableHttp` mode
// (plain HTTP), and a small server of ours on the same SDK
// (mcp_test_server.mjs --http, over TLS with a certificate made here) that
// logs every call, cancellation and session it sees.
//
//   node tests/js/mcp_http_e2e.mjs PATH_TO_SLUICE_NODE
//
// Prints one PASS/FAIL line per check (with what the client saw), exits
// non-zero on any failure, always stops the node and the servers.

import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { execFileSync, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { check, expect, results, withTimeout } from './checks.mjs';
import { startNode, waitHealthy } from './node_process.mjs';
import {
  abortedCallCancelled, busyUnderSessionCap, longCallWithProgress, promptsAndResources, serversReady, status, text,
} from './mcp_checks.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const binary = process.argv[2];
if (!binary) {
  console.error('usage: node mcp_http_e2e.mjs PATH_TO_SLUICE_NODE');
  process.exit(2);
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-mcp-http-'));
const serverLog = path.join(dir, 'server.log');
const cert = path.join(dir, 'cert.pem');
const key = path.join(dir, 'key.pem');
execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert,
  '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
const everythingJs = path.join(here, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');

const logLines = () => (fs.existsSync(serverLog) ? fs.readFileSync(serverLog, 'utf8').split('\n') : []);
const count = (line) => logLines().filter((l) => l === line).length;

async function freePort() {
  const s = net.createServer();
  await new Promise((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address();
  await new Promise((resolve) => s.close(resolve));
  return port;
}

// A server process, resolved once it listens (its output says so).
function startServer(args, env, ready) {
  const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const listening = new Promise((resolve, reject) => {
    const look = (d) => {
      out += d;
      if (ready.test(out)) resolve(child);
    };
    child.stdout.on('data', look);
    child.stderr.on('data', look);
    child.on('exit', (code) => reject(new Error(`server exited (${code}) before listening: ${out}`)));
  });
  child.listening = listening;
  return child;
}

const children = [];
const everythingPort = await freePort();
const oursPort = await freePort();
const startEverything = () => {
  const c = startServer([everythingJs, 'streamableHttp'], { PORT: String(everythingPort) }, /listening on port/);
  children.push(c);
  return c.listening;
};
const startOurs = () => {
  const c = startServer([path.join(here, 'mcp_test_server.mjs'), '--http', String(oursPort), '--tls', cert, key],
    { MCP_TEST_LOG: serverLog }, /listening \d+/);
  children.push(c);
  return c.listening;
};
const killed = async (child) => {
  child.kill('SIGKILL');
  await new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.on('exit', resolve)));
};

const config = path.join(dir, 'sluice.toml');
fs.writeFileSync(config, `
[admission]
session_cap = 1
wait_timeout_s = 0.3

[mcp.servers.everything]
transport = "http"
url = "http://127.0.0.1:${everythingPort}/mcp"
idle_timeout_s = 20
restart_backoff_s = 0.2

[mcp.servers.ours]
transport = "http"
url = "https://127.0.0.1:${oursPort}/mcp"
restart_backoff_s = 0.2

[mcp.servers.ours.tls]
ca_file = ${JSON.stringify(cert)}
`);

const server = async (port, name) => (await status(port)).servers.find((s) => s.name === name);


let everything = await startEverything();
let ours = await startOurs();
const node = startNode(binary, { config });
try {
  await withTimeout((async () => {
    const port = await node.port;
    await waitHealthy(port);
    await serversReady(port);
    const client = new Client({ name: 'sluice-e2e', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`));
    await client.connect(transport);

    await check('over HTTP: both servers initialized, one of them over TLS', async () => {
      const s = await status(port);
      for (const x of s.servers) expect(x.protocol_version === '2025-11-25', `${x.name}: ${JSON.stringify(x)}`);
      expect(count('session') >= 1, 'our server saw no session');
      return s.servers.map((x) => `${x.name} ${x.state}, ${x.tools} tools, protocol ${x.protocol_version}`).join('; ');
    });

    await check('over HTTP: tools/list merges both servers under their prefixes', async () => {
      const { tools } = await client.listTools();
      const names = tools.map((t) => t.name);
      for (const n of ['everything_echo', 'everything_get-sum', 'ours_slow_write', 'ours_slow_read'])
        expect(names.includes(n), `${n} missing from ${names.join(',')}`);
      return `${tools.length} tools`;
    });

    await check('over HTTP: echo and get-sum', async () => {
      const e = await client.callTool({ name: 'everything_echo', arguments: { message: 'over http' } });
      expect(text(e).includes('over http'), `echo said ${text(e)}`);
      const s = await client.callTool({ name: 'everything_get-sum', arguments: { a: 20, b: 22 } });
      expect(text(s).includes('42'), `sum said ${text(s)}`);
      return `${JSON.stringify(text(e))}, ${JSON.stringify(text(s))}`;
    });

    await check('over HTTP: prompts and resources pass through (listed, got, read; templates routed)', () => promptsAndResources(client));

    await check('over HTTP: a long call\'s progress comes through the server\'s SSE answer',
      () => longCallWithProgress(client));

    await check('over HTTP: tool_busy -32016 under a session cap of 1',
      () => busyUnderSessionCap(client, 300));

    await check('over HTTPS: the client aborts, the server sees notifications/cancelled', async () => {
      await sleep(400);
      await abortedCallCancelled(client, logLines, 'cancel1');
      return `server logged the cancel; cancels_sent ${(await server(port, 'ours')).cancels_sent}`;
    });

    await check('over HTTPS: a tool with effects is not retried when its server dies mid-call', async () => {
      await sleep(1600); // the session's permit from the abort above is back
      // Settled as it ends (the kill below may end it first).
      const call = client.callTool({ name: 'ours_slow_write', arguments: { ms: 3000, tag: 'kill1' } })
        .then(() => null, (e) => e);
      await sleep(500);
      await killed(ours);
      const err = await call;
      ours = await startOurs();
      expect(err, 'the call succeeded');
      expect(count('call slow_write kill1') === 1, `the server saw it ${count('call slow_write kill1')} times`);
      return `error ${err.code} "${err.message}"; the server saw it once`;
    });

    await check('over HTTPS: the gateway starts a new session with the restarted server', async () => {
      const r = await client.callTool({ name: 'ours_slow_read', arguments: { ms: 10, tag: 'after' } });
      await serversReady(port);
      const s = await server(port, 'ours');
      expect(text(r).includes('after done'), `result ${text(r)}`);
      // It learns of the restart from a refused connection or from the new
      // server's 404 to the old session, whichever comes first.
      expect(s.restarts >= 1 && /refused|404/.test(s.last_exit), `status ${JSON.stringify(s)}`);
      return `answered "${text(r)}"; restarts ${s.restarts}, last ${JSON.stringify(s.last_exit)}`;
    });

    await check('over HTTPS: a read-only tool is retried when its server dies mid-call', async () => {
      const call = client.callTool({ name: 'ours_slow_read', arguments: { ms: 1500, tag: 'kill2' } })
        .then((r) => r, (e) => e);
      await sleep(500);
      await killed(ours);
      // Down for a while (a slow restart): the retry finds nothing
      // listening, and waits for the new session instead of spending the
      // call's attempts on refused connections.
      await sleep(2000);
      ours = await startOurs();
      const r = await call;
      expect(!(r instanceof Error), `error ${r.code} ${r.message}`);
      expect(text(r).includes('kill2 done'), `result ${text(r)}`);
      expect(count('call slow_read kill2') === 2, `the server saw it ${count('call slow_read kill2')} times`);
      return `answered "${text(r)}" after 2 attempts`;
    });

    await check('over HTTP: the reference server restarted (it answers a lost session 400): a new session', async () => {
      await killed(everything);
      everything = await startEverything();
      const deadline = Date.now() + 15000;
      let r = null;
      let last = null;
      while (!r && Date.now() < deadline) {
        try {
          r = await client.callTool({ name: 'everything_echo', arguments: { message: 'again' } });
        } catch (e) {
          last = `${e.code} ${e.message}`;
          await sleep(300);
        }
      }
      expect(r && text(r).includes('again'), `no answer: ${last}`);
      const s = await server(port, 'everything');
      expect(s.restarts >= 1, `status ${JSON.stringify(s)}`);
      return `answered "${text(r)}"${last ? ` (first: ${last})` : ''}; restarts ${s.restarts}`;
    });
    await client.close();
  })(), 120000, 'the MCP HTTP end-to-end test took over 120 s');
} catch (e) {
  results.failed++;
  console.log(`FAIL ${e.message}\n${node.output.slice(-4000)}`);
} finally {
  const exit = await node.stop();
  await check('the node stopped and ended its session with our server (DELETE)', async () => {
    const deadline = Date.now() + 3000;
    while (count('delete session') === 0 && Date.now() < deadline) await sleep(50);
    expect(count('delete session') >= 1, `server log: ${logLines().slice(-5).join('|')}`);
    return `exit ${JSON.stringify(exit)}`;
  });
  for (const c of children) c.kill('SIGKILL');
}
console.log(`${results.passed} passed, ${results.failed} failed`);
process.exit(results.failed === 0 ? 0 : 1);
