// What the MCP end-to-end tests (mcp_e2e.mjs: stdio servers;
// mcp_http_e2e.mjs: Streamable HTTP ones) share: /status's MCP part, waiting
// for the servers, a result's text, and the checks both make against
// server-everything (prefix "everything_") and our server ("ours_"): a long
// call's progress, tool_busy under a session cap of 1, prompts and
// resources.

import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from './checks.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

// The config of the two stdio servers the node runs: server-everything
// ("everything_") and ours ("ours_", logging to `serverLog`).
export const stdioServersToml = (serverLog) => `
[mcp.servers.everything]
command = ${JSON.stringify(process.execPath)}
args = [${JSON.stringify(path.join(here, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js'))}, "stdio"]
idle_timeout_s = 20

[mcp.servers.ours]
command = ${JSON.stringify(process.execPath)}
args = [${JSON.stringify(path.join(here, 'mcp_test_server.mjs'))}]
env = { MCP_TEST_LOG = ${JSON.stringify(serverLog)} }
restart_backoff_s = 0.2
`;

export const text = (result) => result.content?.map((c) => c.text).join('') ?? '';

// `headers`: an admin key's, where the node has one.
export async function status(port, headers = {}) {
  const r = await fetch(`http://127.0.0.1:${port}/status`, { headers });
  return (await r.json()).mcp;
}

// Resolves with /status's MCP part once every server is ready with tools.
export async function serversReady(port, ms = 20000, headers = {}) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const s = await status(port, headers);
    if (s.servers.every((x) => x.state === 'ready' && x.tools > 0)) return s;
    await sleep(100);
  }
  throw new Error(`servers not ready: ${JSON.stringify(await status(port, headers))}`);
}

// Prompts and resources of server-everything through the gateway: listed,
// a prompt got, a listed resource and a templated one read, an unknown URI
// refused (-32002; -32602 in 2026-07-28, which retired -32002). Returns
// what was seen.
export async function promptsAndResources(client, unknownUriCode = -32002) {
  const { prompts } = await client.listPrompts();
  const names = prompts.map((p) => p.name);
  expect(names.includes('everything_args-prompt'), `prompts ${names.join(',')}`);
  const got = await client.getPrompt({ name: 'everything_args-prompt', arguments: { city: 'Oslo' } });
  const said = JSON.stringify(got.messages);
  expect(said.includes('Oslo'), `prompt said ${said}`);
  const { resources } = await client.listResources();
  const { resourceTemplates } = await client.listResourceTemplates();
  expect(resources.length > 0 && resourceTemplates.length > 0,
    `${resources.length} resources, ${resourceTemplates.length} templates`);
  const doc = await client.readResource({ uri: resources[0].uri });
  expect(doc.contents?.[0]?.uri === resources[0].uri, `read ${JSON.stringify(doc).slice(0, 200)}`);
  const dyn = await client.readResource({ uri: 'demo://resource/dynamic/text/7' });
  expect((dyn.contents?.[0]?.text ?? '').includes('Resource 7'), `read ${JSON.stringify(dyn).slice(0, 200)}`);
  let err = null;
  try { await client.readResource({ uri: 'nope://x' }); } catch (e) { err = e; }
  expect(err?.code === unknownUriCode, `unknown uri: ${err?.code}`);
  return `${prompts.length} prompts, ${resources.length} resources, ${resourceTemplates.length} templates; ` +
    `prompt ${JSON.stringify(got.messages[0].content.text)}; a templated read; unknown uri ${unknownUriCode}`;
}

// callTool with request options: the v1 SDK's takes a result schema
// between, the v2 SDK's (@modelcontextprotocol/client) does not.
export const callWith = (client, params, options, v2 = false) =>
  (v2 ? client.callTool(params, options) : client.callTool(params, undefined, options));

// A long call's progress notifications reach the client. Returns the note.
export async function longCallWithProgress(client, v2 = false) {
  const seen = [];
  const r = await callWith(client,
    { name: 'everything_trigger-long-running-operation', arguments: { duration: 2, steps: 4 } },
    { onprogress: (p) => seen.push(p.progress), timeout: 30000 }, v2);
  expect(seen.length >= 3, `progress ${JSON.stringify(seen)}`);
  expect(text(r).length > 0, 'empty result');
  return `progress ${JSON.stringify(seen)}`;
}

// A second call while ours_slow_read holds the session's one permit:
// tool_busy -32016 from the session tier. Returns the note.
export async function busyUnderSessionCap(client, waitMs) {
  const first = client.callTool({ name: 'ours_slow_read', arguments: { ms: 1500, tag: 'busy1' } });
  await sleep(waitMs);
  let err = null;
  try {
    await client.callTool({ name: 'everything_echo', arguments: { message: 'second' } });
  } catch (e) {
    err = e;
  }
  await first;
  expect(err && err.code === -32016, `second call: ${err ? err.code : 'succeeded'}`);
  expect(err.data?.tier === 'session', `data ${JSON.stringify(err.data)}`);
  return `code ${err.code}, data ${JSON.stringify(err.data)}`;
}

// A call of ours_slow_write (tag `tag`) aborted by its client after 500 ms:
// the call is rejected, and our server logs its cancel (`logLines` reads
// its log) within 5 s.
export async function abortedCallCancelled(client, logLines, tag, v2 = false) {
  const ac = new AbortController();
  const call = callWith(client, { name: 'ours_slow_write', arguments: { ms: 5000, tag } },
    { signal: ac.signal }, v2);
  await sleep(500);
  ac.abort('test cancels');
  let rejected = false;
  try { await call; } catch { rejected = true; }
  expect(rejected, 'the call was not rejected');
  const line = `cancelled slow_write ${tag}`;
  const deadline = Date.now() + 5000;
  while (!logLines().includes(line) && Date.now() < deadline) await sleep(50);
  expect(logLines().filter((l) => l === line).length === 1, `server log: ${logLines().join('|')}`);
}
