// Starts and stops sluice-node for the JS tests: the port it reports for
// `--listen 127.0.0.1:PORT` (0: any), its output kept for a failure's report.

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';

export function startNode(binary, { config = null, port = 0, env = {} } = {}) {
  const args = config ? ['--config', config] : [];
  const child = spawn(binary, [...args, '--listen', `127.0.0.1:${port}`], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const node = { child, output: '', exit: null };
  node.exited = once(child, 'exit').then(([code, signal]) => {
    node.exit = { code, signal };
    return node.exit;
  });
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d) => { node.output += d; });
  node.port = new Promise((resolve, reject) => {
    child.stdout.on('data', (d) => {
      node.output += d;
      const m = /listening on http:\/\/[^\s:]+:(\d+)/.exec(node.output);
      if (m) resolve(Number(m[1]));
    });
    child.on('error', reject);
    node.exited.then(({ code, signal }) =>
      reject(new Error(`sluice-node exited before listening (code ${code}, signal ${signal}):\n${node.output}`)));
  });
  // SIGTERM, then SIGKILL if it is still there after `graceMs`.
  node.stop = async (graceMs = 5000) => {
    if (node.exit) return node.exit;
    child.kill('SIGTERM');
    const t = sleep(graceMs).then(() => 'late');
    if ((await Promise.race([node.exited, t])) === 'late') child.kill('SIGKILL');
    return node.exited;
  };
  return node;
}

// Resolves when GET /healthz answers 200, or throws after `ms`.
export async function waitHealthy(port, ms = 15000) {
  const deadline = Date.now() + ms;
  let last = null;
  while (Date.now() < deadline) {
    try {
      const r = await fetch(`http://127.0.0.1:${port}/healthz`);
      if (r.status === 200) return;
      last = `status ${r.status}`;
    } catch (e) {
      last = e.message;
    }
    await sleep(100);
  }
  throw new Error(`sluice-node on port ${port} not healthy in ${ms} ms (${last})`);
}
