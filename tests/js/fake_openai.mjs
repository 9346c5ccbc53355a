// The fake OpenAI upstream of openai_e2e.mjs: it answers chat completions
// (JSON, a paced stream, a 400 for the prompt 'bad', 404 elsewhere) and
// records every request it saw; and the CA and 127.0.0.1 certificate it is
// served with over HTTPS, made by the `openssl` command.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export const STREAM_CHUNKS = ['Sluice ', 'streams ', 'tokens ', 'as they ', 'come.'];
const STREAM_GAP_MS = 150;
// The Authorization header the node is configured to send upstream.
export const SECRET = 'Bearer e2e-secret';

const now = () => performance.now();

// -- the fake upstream --------------------------------------------------------

export const upstream = {
  requests: [], // { method, url, authorization, body }
  streamFinishedAt: null, // performance.now() after [DONE] was written
};

// The text of a chat request's last message ("" when there is none).
export function lastContent(body) {
  const messages = Array.isArray(body?.messages) ? body.messages : [];
  const last = messages[messages.length - 1];
  return typeof last?.content === 'string' ? last.content : '';
}

function sendJson(res, status, value) {
  const text = JSON.stringify(value);
  res.writeHead(status, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(text),
  });
  res.end(text);
}

async function streamCompletion(res, model) {
  const id = 'chatcmpl-upstream-stream-1';
  const created = Math.floor(Date.now() / 1000);
  res.writeHead(200, {
    'Content-Type': 'text/event-stream',
    'Cache-Control': 'no-cache',
    Connection: 'keep-alive',
  });
  for (let i = 0; i < STREAM_CHUNKS.length; i++) {
    if (i > 0) await sleep(STREAM_GAP_MS);
    if (res.destroyed) return;
    const chunk = {
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      system_fingerprint: 'fp_e2e',
      choices: [
        {
          index: 0,
          delta: i === 0
            ? { role: 'assistant', content: STREAM_CHUNKS[i] }
            : { content: STREAM_CHUNKS[i] },
          logprobs: null,
          finish_reason: i === STREAM_CHUNKS.length - 1 ? 'stop' : null,
        },
      ],
    };
    res.write(`data: ${JSON.stringify(chunk)}\n\n`);
  }
  await sleep(STREAM_GAP_MS);
  res.end('data: [DONE]\n\n');
  upstream.streamFinishedAt = now();
}

export function handleUpstream(req, res) {
  const parts = [];
  req.on('data', (c) => parts.push(c));
  req.on('end', () => {
    const raw = Buffer.concat(parts).toString('utf8');
    let body = null;
    try {
      body = JSON.parse(raw);
    } catch {
      // left null: answered with 400 below
    }
    upstream.requests.push({
      method: req.method,
      url: req.url,
      authorization: req.headers.authorization,
      requestId: req.headers['x-request-id'],
      traceparent: req.headers.traceparent,
      body,
    });
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
      return sendJson(res, 404, {
        error: { message: `upstream: no ${req.method} ${req.url}`,
                 type: 'invalid_request_error', param: null, code: null },
      });
    }
    if (body === null) {
      return sendJson(res, 400, {
        error: { message: 'upstream: body is not JSON',
                 type: 'invalid_request_error', param: null, code: null },
      });
    }
    const model = body.model ?? 'unknown';
    if (lastContent(body) === 'bad') {
      return sendJson(res, 400, {
        error: {
          message: "upstream says: 'bad' is not an acceptable prompt",
          type: 'invalid_request_error',
          param: 'messages',
          code: 'e2e_bad_prompt',
        },
      });
    }
    if (body.stream === true) {
      streamCompletion(res, model).catch((e) => {
        console.error('upstream stream error:', e);
        res.destroy();
      });
      return;
    }
    sendJson(res, 200, {
      id: 'chatcmpl-upstream-e2e-1',
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model,
      system_fingerprint: 'fp_e2e',
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: 'Hello from the fake upstream.',
                     refusal: null },
          logprobs: null,
          finish_reason: 'stop',
        },
      ],
      usage: { prompt_tokens: 5, completion_tokens: 6, total_tokens: 11 },
    });
  });
}

// A CA and a certificate for 127.0.0.1 signed by it, made here.
export function makeCertificates(dir) {
  const file = (name) => path.join(dir, name);
  const openssl = (...args) => execFileSync('openssl', args, { stdio: 'pipe' });
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2',
          '-subj', '/CN=sluice e2e CA', '-keyout', file('ca.key'), '-out', file('ca.pem'));
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1',
          '-keyout', file('server.key'), '-out', file('server.csr'));
  fs.writeFileSync(file('ext.cnf'), 'subjectAltName = IP:127.0.0.1\n');
  openssl('x509', '-req', '-in', file('server.csr'), '-CA', file('ca.pem'),
          '-CAkey', file('ca.key'), '-CAcreateserial', '-days', '2',
          '-extfile', file('ext.cnf'), '-out', file('server.pem'));
  return { ca: file('ca.pem'), key: fs.readFileSync(file('server.key')),
           cert: fs.readFileSync(file('server.pem')) };
}
