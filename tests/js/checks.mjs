// The JS tests' checks: each prints one PASS or FAIL line; `results` counts
// them for the exit code.

export const results = { passed: 0, failed: 0 };

export class CheckFailure extends Error {}

export function expect(cond, what) {
  if (!cond) throw new CheckFailure(what);
}

export async function check(name, fn) {
  try {
    const detail = await fn();
    results.passed++;
    console.log(`PASS ${name}${detail ? ` (${detail})` : ''}`);
  } catch (e) {
    results.failed++;
    const why = e instanceof CheckFailure ? e.message : e?.stack ?? String(e);
    console.log(`FAIL ${name}: ${why}`);
  }
}

// Rejects with `message` unless `promise` settles within `ms`.
export function withTimeout(promise, ms, message) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// Polls `fn` until it returns a truthy value; throws `what` after `ms`.
export async function until(fn, ms, what) {
  const deadline = Date.now() + ms;
  let last;
  while (Date.now() < deadline) {
    last = await fn();
    if (last) return last;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new CheckFailure(`${what} (not within ${ms} ms)`);
}
