// A small MCP server on the official SDK (McpServer) for the gateway's
// end-to-end tests: tools whose effects the test must see exactly once or
// more. Every call and cancellation it receives is appended, one line each,
// to the file named by MCP_TEST_LOG.
//
//   node mcp_test_server.mjs                      stdio
//   node mcp_test_server.mjs --http PORT [--tls CERT KEY]
//        Streamable HTTP at /mcp (sessions; an unknown one gets 404), over
//        TLS with CERT and KEY; prints "listening PORT" once it listens.
//
//   slow_write  (no annotations: may have effects, never retried) waits
//               `ms`, then answers.
//   slow_read   (readOnlyHint) waits `ms`, then answers.

import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { randomUUID } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

const log = (line) => {
  if (process.env.MCP_TEST_LOG) fs.appendFileSync(process.env.MCP_TEST_LOG, `${line}\n`);
};

function makeServer() {
  const server = new McpServer({ name: 'sluice-test-server', version: '1.0.0' });

  function slow(name) {
    return async ({ ms, tag }, extra) => {
      log(`call ${name} ${tag}`);
      extra.signal.addEventListener('abort', () => log(`cancelled ${name} ${tag}`));
      await new Promise((resolve) => setTimeout(resolve, ms));
      return { content: [{ type: 'text', text: `${name} ${tag} done` }] };
    };
  }

  server.registerTool('slow_write', {
    description: 'Waits, then answers; may have effects.',
    inputSchema: { ms: z.number(), tag: z.string() },
  }, slow('slow_write'));

  server.registerTool('slow_read', {
    description: 'Waits, then answers; reads only.',
    inputSchema: { ms: z.number(), tag: z.string() },
    annotations: { readOnlyHint: true },
  }, slow('slow_read'));

  return server;
}

// A stop as the gateway makes it: stdin closed (logged, stdio), SIGTERM
// (logged) if that did not end it, SIGKILL last.
process.on('SIGTERM', () => {
  log(`sigterm ${process.pid}`);
  process.exit(0);
});

const args = process.argv.slice(2);
if (args[0] !== '--http') {
  await makeServer().connect(new StdioServerTransport());
  process.stdin.on('end', () => log(`stdin closed ${process.pid}`));
  log(`started ${process.pid}`);
} else {
  const sessions = new Map();
  const handle = async (req, res) => {
    const sid = req.headers['mcp-session-id'];
    if (sid) {
      const t = sessions.get(sid);
      if (!t) {
        log(`unknown session ${req.method}`);
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } }));
        return;
      }
      if (req.method === 'DELETE') log(`delete session`);
      return t.handleRequest(req, res);
    }
    if (req.method !== 'POST') {
      res.writeHead(400).end();
      return;
    }
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => { sessions.set(id, transport); log('session'); },
    });
    transport.onclose = () => { if (transport.sessionId) sessions.delete(transport.sessionId); };
    await makeServer().connect(transport);
    await transport.handleRequest(req, res);
  };
  const tls = args.indexOf('--tls');
  const srv = tls >= 0
    ? https.createServer({ cert: fs.readFileSync(args[tls + 1]), key: fs.readFileSync(args[tls + 2]) }, handle)
    : http.createServer(handle);
  srv.listen(Number(args[1]), '127.0.0.1', () => {
    log(`started ${process.pid}`);
    console.log(`listening ${srv.address().port}`);
  });
}
