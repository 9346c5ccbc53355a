// End-to-end test: the official `openai` npm client talks to sluice-node, which
// forwards over verified HTTPS to a fake OpenAI upstream run here (node:https
// on 127.0.0.1, with a CA and certificate made by the `openssl` command).
// The node has a client key: the client must send it.
//
//   node tests/js/openai_e2e.mjs PATH_TO_SLUICE_NODE
//
// Checks: (a) a non-streaming chat completion comes from the upstream, which
// saw the node's configured Authorization header, not the client's key;
// (b) a streaming completion arrives chunk by chunk, the first chunk before
// the upstream finished writing (pass-through, not buffered); (c) an upstream
// 400 reaches the client with its status and body; (d) an unrouted endpoint
// is a 404 `not_found`; (j) a wrong client key is a 401 `invalid_api_key` the
// upstream never sees; (l) a key's token limit refuses a call too large for it
// with 429 rate_limit_exceeded, type `tokens`, and the x-ratelimit-* headers
// the answers within it carry too; (k) the answer's X-Request-Id is the one the upstream
// got, and a traceparent passes through. Prints one line per check, exits non-zero on any
// failure, and always stops sluice-node and the upstream. Then, with no
// upstream, against the embedded default config: (e) a chat completion,
// (f) a stream with usage last, (g) embeddings (base64 and floats), (h) the
// model list, (i) the fake upstream untouched.

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import OpenAI from 'openai';
import { check, expect, results, withTimeout } from './checks.mjs';
import {
  SECRET, STREAM_CHUNKS, handleUpstream, lastContent, makeCertificates, upstream,
} from './fake_openai.mjs';

const OVERALL_TIMEOUT_MS = 1000 * Number(process.env.SLUICE_E2E_TIMEOUT_S || 60);
const CLIENT_KEY = 'unused';
// The key the node requires of its clients in the first part.
const NODE_KEY = 'e2e-client-key-0123456789';
// A second key, with a limit of 100 tokens per minute.
const SMALL_KEY = 'e2e-small-key-0123456789';

const nodeBinary = process.argv[2];
if (!nodeBinary) {
  console.error('usage: node openai_e2e.mjs PATH_TO_SLUICE_NODE');
  process.exit(64);
}

const now = () => performance.now();

// -- sluice-node --------------------------------------------------------------

let child = null;
let childExit = null; // { code, signal } once it exited
let childOutput = '';

// Starts sluice-node on `configPath` (null: its embedded default config).
function startNode(configPath) {
  const args = configPath ? ['--config', configPath] : [];
  childExit = null;
  childOutput = '';
  child = spawn(nodeBinary, [...args, '--listen', '127.0.0.1:0'], {
    env: { ...process.env, SLUICE_E2E_KEY: SECRET, SLUICE_E2E_NODE_KEY: NODE_KEY,
           SLUICE_E2E_SMALL_KEY: SMALL_KEY },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = once(child, 'exit').then(([code, signal]) => {
    childExit = { code, signal };
    return childExit;
  });
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d) => { childOutput += d; });
  const port = new Promise((resolve, reject) => {
    child.stdout.on('data', (d) => {
      childOutput += d;
      const m = /listening on http:\/\/[^\s:]+:(\d+)/.exec(childOutput);
      if (m) resolve(Number(m[1]));
    });
    child.on('error', reject);
    exited.then(({ code, signal }) =>
      reject(new Error(`sluice-node exited before listening (code ${code}, signal ${signal})`)));
  });
  return { port, exited };
}

async function waitHealthy(port, deadlineMs) {
  let last = null;
  while (now() < deadlineMs) {
    if (childExit) throw new Error('sluice-node exited while starting');
    try {
      const res = await fetch(`http://127.0.0.1:${port}/healthz`,
                              { signal: AbortSignal.timeout(1000) });
      if (res.status === 200) return;
      last = `status ${res.status}`;
    } catch (e) {
      last = e.message;
    }
    await sleep(50);
  }
  throw new Error(`sluice-node not healthy in time (${last})`);
}

// Stops sluice-node: SIGTERM, then SIGKILL if it does not exit in time.
async function stopNode(exited, graceMs) {
  if (!child || childExit) return childExit;
  child.kill('SIGTERM');
  const timer = sleep(graceMs).then(() => null);
  const result = await Promise.race([exited, timer]);
  if (result) return result;
  if (!childExit) child.kill('SIGKILL');
  await exited;
  return { ...childExit, killed: true };
}

// Last resort on any way out of this process.
process.on('exit', () => {
  if (child && !childExit) child.kill('SIGKILL');
});

// -- the test -----------------------------------------------------------------

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-js-e2e-'));

const pki = makeCertificates(tmp);
const server = https.createServer({ key: pki.key, cert: pki.cert }, handleUpstream);
let nodeExited = null;

async function main() {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const upstreamPort = server.address().port;
  console.log(`upstream listening on https://127.0.0.1:${upstreamPort}`);

  const configPath = path.join(tmp, 'sluice.toml');
  fs.writeFileSync(configPath, `# written by tests/js/openai_e2e.mjs
[node]
shutdown_grace_s = 2

[auth.keys.e2e]
key = "env:SLUICE_E2E_NODE_KEY"

[auth.keys.e2e-small]                # a key whose every call is too large
key = "env:SLUICE_E2E_SMALL_KEY"
tokens_per_minute = 100

[sources.fake-openai]
type = "http"
base_url = "https://127.0.0.1:${upstreamPort}/v1"
connect_timeout_s = 5
response_timeout_s = 30
  [sources.fake-openai.headers]
  Authorization = "env:SLUICE_E2E_KEY"
  [sources.fake-openai.tls]
  ca_file = "${pki.ca}"

[routes."/v1/chat/completions"]
kind = "chat"
sources = ["fake-openai"]
`);

  const started = startNode(configPath);
  nodeExited = started.exited;
  const port = await withTimeout(started.port, 15_000,
                                 'sluice-node did not report its port in 15 s');
  await check('sluice-node reports the port it bound for --listen 127.0.0.1:0', async () => {
    expect(port > 0 && port < 65536, `reported port ${port}`);
    return `port ${port}`;
  });
  await waitHealthy(port, now() + 15_000);
  console.log(`sluice-node healthy on 127.0.0.1:${port}`);

  const client = new OpenAI({
    baseURL: `http://127.0.0.1:${port}/v1`,
    apiKey: NODE_KEY,
    maxRetries: 0,
    timeout: 20_000,
  });

  // (a) non-streaming
  await check('(a) non-streaming chat completion passes through', async () => {
    const before = upstream.requests.length;
    const completion = await client.chat.completions.create({
      model: 'gpt-e2e',
      messages: [{ role: 'user', content: 'hello' }],
    });
    expect(completion.id === 'chatcmpl-upstream-e2e-1',
           `id ${JSON.stringify(completion.id)} is not the upstream's`);
    expect(completion.choices?.[0]?.message?.content === 'Hello from the fake upstream.',
           `content ${JSON.stringify(completion.choices?.[0]?.message?.content)}`);
    const seen = upstream.requests.slice(before);
    expect(seen.length === 1, `upstream saw ${seen.length} request(s), expected 1`);
    expect(seen[0].url === '/v1/chat/completions', `upstream path ${seen[0].url}`);
    expect(seen[0].authorization === SECRET,
           `upstream saw Authorization ${JSON.stringify(seen[0].authorization)}, ` +
           `expected the node's configured ${JSON.stringify(SECRET)}`);
    expect(lastContent(seen[0].body) === 'hello' && seen[0].body.model === 'gpt-e2e',
           'upstream did not get the client\'s body');
    return `id ${completion.id}, upstream saw Authorization: ${seen[0].authorization}`;
  });

  // (b) streaming
  await check('(b) streaming chat completion arrives incrementally', async () => {
    const before = upstream.requests.length;
    upstream.streamFinishedAt = null;
    const t0 = now();
    const { data: stream, response } = await client.chat.completions.create({
      model: 'gpt-e2e',
      messages: [{ role: 'user', content: 'stream please' }],
      stream: true,
    }).withResponse();
    const contentType = response.headers.get('content-type') ?? '';
    const deltas = [];
    const ids = new Set();
    let firstChunkAt = null;
    for await (const chunk of stream) {
      if (firstChunkAt === null) firstChunkAt = now();
      ids.add(chunk.id);
      const d = chunk.choices?.[0]?.delta?.content;
      if (typeof d === 'string' && d !== '') deltas.push(d);
    }
    const endAt = now();
    const seen = upstream.requests.slice(before);
    expect(seen.length === 1, `upstream saw ${seen.length} request(s), expected 1`);
    expect(seen[0].body?.stream === true, 'upstream did not get "stream": true');
    expect(seen[0].authorization === SECRET,
           `upstream saw Authorization ${JSON.stringify(seen[0].authorization)}`);
    expect(JSON.stringify(deltas) === JSON.stringify(STREAM_CHUNKS),
           `deltas ${JSON.stringify(deltas)}, expected ${JSON.stringify(STREAM_CHUNKS)}`);
    expect(ids.size === 1 && ids.has('chatcmpl-upstream-stream-1'),
           `chunk ids ${JSON.stringify([...ids])}`);
    expect(upstream.streamFinishedAt !== null, 'upstream never finished its stream');
    const first = (firstChunkAt - t0).toFixed(0);
    const done = (upstream.streamFinishedAt - t0).toFixed(0);
    const timing = `first chunk at ${first} ms, upstream finished at ${done} ms, ` +
                   `client done at ${(endAt - t0).toFixed(0)} ms`;
    expect(contentType.startsWith('text/event-stream'),
           `Content-Type ${JSON.stringify(contentType)}, expected text/event-stream; ${timing}`);
    expect(firstChunkAt < upstream.streamFinishedAt,
           `buffered, not passed through: ${timing}`);
    return `${deltas.length} deltas in order; ${timing}`;
  });

  // (c) permanent upstream error
  await check('(c) upstream 400 passes through with status and body', async () => {
    const before = upstream.requests.length;
    let err = null;
    try {
      await client.chat.completions.create({
        model: 'gpt-e2e',
        messages: [{ role: 'user', content: 'bad' }],
      });
    } catch (e) {
      err = e;
    }
    expect(err !== null, 'the call did not throw');
    expect(err instanceof OpenAI.APIError, `threw ${err?.constructor?.name}: ${err?.message}`);
    expect(err.status === 400, `status ${err.status}, expected 400 (${err.message})`);
    expect(err instanceof OpenAI.BadRequestError, `${err.constructor.name}, expected BadRequestError`);
    expect(err.error?.code === 'e2e_bad_prompt' && err.error?.param === 'messages',
           `error body ${JSON.stringify(err.error)} is not the upstream's`);
    expect(err.message.includes("upstream says: 'bad' is not an acceptable prompt"),
           `message ${JSON.stringify(err.message)}`);
    const seen = upstream.requests.length - before;
    expect(seen === 1, `upstream saw ${seen} request(s); a permanent error must not be retried`);
    return err.message;
  });

  // (d) a route that is not configured
  await check('(d) unrouted endpoint is 404 not_found', async () => {
    const before = upstream.requests.length;
    let err = null;
    try {
      await client.embeddings.create({ model: 'emb-e2e', input: 'hello' });
    } catch (e) {
      err = e;
    }
    expect(err !== null, 'the call did not throw');
    expect(err instanceof OpenAI.APIError, `threw ${err?.constructor?.name}: ${err?.message}`);
    expect(err.status === 404, `status ${err.status}, expected 404 (${err.message})`);
    expect(err.error?.code === 'not_found', `error body ${JSON.stringify(err.error)}`);
    expect(upstream.requests.length === before, 'the upstream was called');
    return err.message;
  });

  await check('(j) a wrong client key is 401 invalid_api_key, never sent upstream', async () => {
    const before = upstream.requests.length;
    const stranger = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`,
                                  apiKey: 'not-the-key-0123456789', maxRetries: 0 });
    let err = null;
    try {
      await stranger.chat.completions.create({ model: 'gpt-e2e', messages: [] });
    } catch (e) {
      err = e;
    }
    expect(err instanceof OpenAI.AuthenticationError,
           `threw ${err?.constructor?.name}: ${err?.message}`);
    expect(err.status === 401 && err.error?.code === 'invalid_api_key',
           `status ${err.status}, body ${JSON.stringify(err.error)}`);
    expect(upstream.requests.length === before, 'the upstream was called');
    return err.message;
  });

  await check('(l) a token limit\'s 429 reaches the client with OpenAI\'s code, type and x-ratelimit headers', async () => {
    const before = upstream.requests.length;
    const small = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`,
                               apiKey: SMALL_KEY, maxRetries: 0 });
    let err = null;
    try {
      await small.chat.completions.create({ model: 'gpt-e2e', max_tokens: 500,
                                            messages: [{ role: 'user', content: 'hi' }] });
    } catch (e) {
      err = e;
    }
    expect(err instanceof OpenAI.RateLimitError,
           `threw ${err?.constructor?.name}: ${err?.message}`);
    expect(err.status === 429 && err.error?.code === 'rate_limit_exceeded' &&
           err.error?.type === 'tokens',
           `status ${err.status}, body ${JSON.stringify(err.error)}`);
    const h = err.headers || {};
    expect(h['x-ratelimit-limit-tokens'] === '100' && h['x-ratelimit-remaining-tokens'] === '100' &&
           h['x-ratelimit-reset-tokens'] === '0s',
           `headers ${JSON.stringify(h)}`);
    expect(upstream.requests.length === before, 'the upstream was called');
    // Within the limit, the answer carries the same headers.
    const { response } = await small.chat.completions.create(
      { model: 'gpt-e2e', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] },
    ).withResponse();
    const left = Number(response.headers.get('x-ratelimit-remaining-tokens'));
    expect(response.headers.get('x-ratelimit-limit-tokens') === '100' && left === 100 - 58,
           `limit ${response.headers.get('x-ratelimit-limit-tokens')}, remaining ${left}`);
    return `${err.message}; then remaining ${left}`;
  });

  await check('(k) X-Request-Id comes back and reached the upstream, traceparent too', async () => {
    const before = upstream.requests.length;
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const { response } = await client.chat.completions.create(
      { model: 'gpt-e2e', messages: [{ role: 'user', content: 'trace me' }] },
      { headers: { traceparent } },
    ).withResponse();
    const id = response.headers.get('x-request-id');
    const seen = upstream.requests.slice(before);
    expect(id && id.length > 0, 'no X-Request-Id on the answer');
    expect(seen.length === 1 && seen[0].requestId === id,
           `upstream saw X-Request-Id ${JSON.stringify(seen[0]?.requestId)}, client got ${id}`);
    expect(seen[0].traceparent === traceparent,
           `upstream saw traceparent ${JSON.stringify(seen[0].traceparent)}`);
    return `X-Request-Id ${id}`;
  });

  // The node's documented shutdown: SIGTERM drains and exits 0.
  await check('sluice-node exits 0 on SIGTERM', async () => {
    const r = await stopNode(nodeExited, 10_000);
    expect(r && !r.killed && r.code === 0,
           `exit ${JSON.stringify(r)}`);
    return 'exit code 0';
  });

  await defaultConfigChecks();
}

// The official client against the default config: no upstream at all, the
// simulated sources answer in OpenAI's shapes.
async function defaultConfigChecks() {
  const before = upstream.requests.length;
  const started = startNode(null);
  nodeExited = started.exited;
  const port = await withTimeout(started.port, 15_000,
                                 'sluice-node (default config) did not report its port');
  await waitHealthy(port, now() + 15_000);
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: CLIENT_KEY });

  await check('(e) default config: a chat completion the client can read', async () => {
    const r = await client.chat.completions.create({
      model: 'sim-chat',
      messages: [{ role: 'user', content: 'Hello there' }],
    });
    expect(r.object === 'chat.completion', `object ${r.object}`);
    expect(r.model === 'sim-chat', `model ${r.model}`);
    const text = r.choices[0]?.message?.content;
    expect(typeof text === 'string' && text.length > 0, `content ${JSON.stringify(text)}`);
    expect(r.choices[0].finish_reason === 'stop', `finish_reason ${r.choices[0].finish_reason}`);
    expect(r.usage.total_tokens === r.usage.prompt_tokens + r.usage.completion_tokens,
           `usage ${JSON.stringify(r.usage)}`);
    return text;
  });

  await check('(f) default config: a stream with usage last', async () => {
    const stream = await client.chat.completions.create({
      model: 'any-model-uses-the-default',
      messages: [{ role: 'user', content: 'Stream please' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let finish = null;
    let usage = null;
    let chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      expect(chunk.object === 'chat.completion.chunk', `object ${chunk.object}`);
      expect(chunk.model === 'any-model-uses-the-default', `model ${chunk.model}`);
      const c = chunk.choices[0];
      if (c?.delta?.content) text += c.delta.content;
      if (c?.finish_reason) finish = c.finish_reason;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text.length > 0, 'no content');
    expect(finish === 'stop', `finish_reason ${finish}`);
    expect(usage && usage.completion_tokens > 0, `usage ${JSON.stringify(usage)}`);
    return `${chunks} chunks: ${text}`;
  });

  await check('(g) default config: embeddings, base64 (the client default) and floats', async () => {
    const b = await client.embeddings.create({ model: 'sim-embedding', input: ['one', 'two', 'one'] });
    expect(b.data.length === 3, `${b.data.length} vectors`);
    const v = b.data.map((d) => d.embedding);
    expect(v.every((x) => Array.isArray(x) && x.length === 1536),
           `lengths ${v.map((x) => x?.length)}`);
    const norm = Math.sqrt(v[0].reduce((a, x) => a + x * x, 0));
    expect(Math.abs(norm - 1) < 1e-3, `norm ${norm}`);
    expect(v[0].every((x, i) => x === v[2][i]), 'the same text gave different vectors');
    expect(v[0].some((x, i) => x !== v[1][i]), 'different texts gave the same vector');
    const f = await client.embeddings.create({
      model: 'sim-embedding', input: 'one', encoding_format: 'float', dimensions: 8,
    });
    expect(f.data[0].embedding.length === 8, `length ${f.data[0].embedding.length}`);
    return `${v[0].length} dimensions, norm ${norm.toFixed(4)}`;
  });

  await check('(h) default config: models.list names the configured models', async () => {
    const ids = [];
    for await (const m of client.models.list()) ids.push(m.id);
    expect(ids.includes('sim-chat') && ids.includes('sim-embedding'), `ids ${ids}`);
    const m = await client.models.retrieve('sim-chat');
    expect(m.id === 'sim-chat' && m.object === 'model', JSON.stringify(m));
    return ids.join(', ');
  });

  await check('(i) default config: the fake upstream was never called', async () => {
    expect(upstream.requests.length === before, 'the upstream saw requests');
  });

  await check('default-config sluice-node exits 0 on SIGTERM', async () => {
    const r = await stopNode(nodeExited, 10_000);
    expect(r && !r.killed && r.code === 0, `exit ${JSON.stringify(r)}`);
    return 'exit code 0';
  });
}

async function cleanup() {
  if (nodeExited) await stopNode(nodeExited, 5_000).catch(() => {});
  server.closeAllConnections?.();
  await new Promise((resolve) => server.close(() => resolve()));
  fs.rmSync(tmp, { recursive: true, force: true });
}

const overall = setTimeout(async () => {
  console.log(`FAIL overall timeout: not done in ${OVERALL_TIMEOUT_MS / 1000} s`);
  if (child && !childExit) {
    child.kill('SIGKILL');
    await withTimeout(once(child, 'exit'), 2_000, 'no exit').catch(() => {});
  }
  fs.rmSync(tmp, { recursive: true, force: true });
  console.log(`--- sluice-node output ---\n${childOutput}`);
  console.log(`${results.passed} passed, ${results.failed + 1} failed`);
  process.exit(1);
}, OVERALL_TIMEOUT_MS);

try {
  await main();
} catch (e) {
  results.failed++;
  console.log(`FAIL setup: ${e?.stack ?? e}`);
}
await cleanup();
clearTimeout(overall);
if (results.failed > 0) {
  console.log(`--- sluice-node output ---\n${childOutput}`);
}
console.log(`${results.passed} passed, ${results.failed} failed`);
process.exit(results.failed > 0 ? 1 : 0);
