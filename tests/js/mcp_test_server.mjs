// A small MCP server on the official SDK (McpServer, stdio) for the gateway's
// end-to-end test: tools whose effects the test must see exactly once or
// more. Every call and cancellation it receives is appended, one line each,
// to the file named by MCP_TEST_LOG.
//
//   slow_write  (no annotations: may have effects, never retried) waits
//               `ms`, then answers.
//   slow_read   (readOnlyHint) waits `ms`, then answers.

import fs from 'node:fs';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const log = (line) => {
  if (process.env.MCP_TEST_LOG) fs.appendFileSync(process.env.MCP_TEST_LOG, `${line}\n`);
};

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

await server.connect(new StdioServerTransport());
log(`started ${process.pid}`);
