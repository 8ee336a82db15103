#!/usr/bin/env node
// bench.js — the node-redlock peer of the redlock benchmarks (bench/CONTRACT.md).
//
//   node bench/peers/node/bench.js --nodes redis://127.0.0.1:P1,... --scenario NAME
//        [--seconds S] [--concurrency C] [--samples FILE] [--locks N]
//
// Versions (pinned in package.json / package-lock.json): redlock 5.0.0-beta.2,
// ioredis 4.28.5 (redlock 5.0.0-beta.2 declares no peer dependency; its own
// tests are built against ioredis ^4.28.5, so the 4.x line it was made for).
//
// Settings — every one is the library default; nothing is overridden:
//   Redlock (read from the installed dist/cjs/index.js, defaultSettings):
//     driftFactor 0.01, retryCount 10 (11 attempts), retryDelay 200 ms,
//     retryJitter 100 ms (the delay is retryDelay ± retryJitter, i.e. 100–300
//     ms), automaticExtensionThreshold 500 ms (only used by redlock.using(),
//     which is not used here: plain acquire + release). The printed settings
//     on stderr come from the live instance.
//   ioredis (per master, one client = one connection): connectTimeout 10000,
//     enableReadyCheck true, enableOfflineQueue true, maxRetriesPerRequest 20,
//     enableAutoPipelining false (each command is its own socket write; many
//     commands are still in flight at once on one connection), no command
//     timeout (ioredis has none by default: a paused master simply never
//     votes, redlock decides on the first majority).
//   Lock duration 10000 ms (memory: 600000 ms, to outlive the run).
//   Resources "bench:node:<pid>-<random>:…", so runs never share keys.
//   Before measuring, one warm-up acquire + release per Redlock instance
//   (redlock sends EVALSHA and falls back to EVAL on NOSCRIPT; the warm-up
//   caches its scripts on every master, as the floor's SCRIPT LOAD does).
//
// Scenarios:
//   latency     one client, acquire + release of ONE resource in a loop for S s;
//   throughput  C (default 64) concurrent async workers, each on its own
//               resource, all on the same five connections, for S s;
//               cpu_us_per_op = process.cpuUsage() (user + system) over the
//               run / pairs;
//   handoff     two Redlock instances, each with its own five connections
//               (as two processes would have): the holder acquires; the waiter
//               calls acquire() and retries with the default retry settings;
//               once the waiter's first attempt has been refused by a majority
//               (redlock's "error" events carry ResourceLockedError per node),
//               the holder holds a further uniform 0–300 ms (a random phase of
//               the waiter's 100–300 ms retry delay) and releases. Sample =
//               waiter's acquire resolving − holder's release resolving.
//               attempts_per_handoff = mean of lock.attempts.length;
//               failed_attempts_per_handoff = mean of lock.attempts.length − 2
//               (the first attempt, refused before the release, starts the wait).
//               The waiter's 11 attempts span ≥ 1 s, far more than it waits;
//   handoff-crowd  one process of a crowd on ONE shared resource (--resource,
//               scripts/bench.sh starts several): W async waiters (--waiters,
//               default 1) on this process's one Redlock instance, each calling
//               acquire() with the default retries; one that gets the lock holds
//               it uniform 1–5 ms, releases, and waits again, for S s. An
//               acquire that runs out of retries (ExecutionError) is called
//               again: the same wait goes on (counted as gave_up on stderr, not
//               an error). At the stop no new wait starts; the acquire()s on
//               their way end by themselves (no cancel in redlock 5). Every
//               acquisition goes to --events FILE (bench/CONTRACT.md), on
//               process.hrtime (CLOCK_MONOTONIC, shared with the other
//               processes). --gate FIFO: after the warm-up write "ready PID"
//               to FIFO, then start on a line "go" on stdin;
//   memory      hold N locks (default 100000) at once, acquired by 64
//               concurrent workers; RSS (process.memoryUsage().rss) after a
//               full GC before and after; bytes_per_lock = delta / N (also
//               heap_bytes_per_lock, the V8 heapUsed delta). Then release all.
//
// Output: exactly one JSON line on stdout; diagnostics on stderr. Exit 0 on
// success, 1 when the nodes are unreachable or the run failed, 2 on a usage
// error. Percentiles are nearest-rank over all samples (µs, integers).
'use strict';

const fs = require('fs');
const crypto = require('crypto');
const v8 = require('v8');
const vm = require('vm');
const Redis = require('ioredis');
const Redlock = require('redlock').default;
const { ExecutionError } = require('redlock');

const SYSTEM = 'node-redlock';
const TTL_MS = 10000;
const MEMORY_TTL_MS = 600000;
const MEMORY_WORKERS = 64;

function usage(msg) {
  process.stderr.write(
    `bench.js: ${msg}\n` +
      'usage: node bench.js --nodes redis://127.0.0.1:PORT,... --scenario latency|throughput|handoff|memory|handoff-crowd\n' +
      '                     [--seconds S] [--concurrency C] [--samples FILE] [--locks N]\n' +
      '                     [--waiters W] [--events FILE] [--resource NAME] [--gate FIFO]\n');
  process.exit(2);
}

function parseArgs(argv) {
  const o = { nodes: null, scenario: null, seconds: 3, concurrency: 64, samples: null, locks: 100000,
    waiters: 1, events: null, resource: 'bench-handoff-crowd', gate: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    const num = (v, min, max, integer) => {
      const n = Number(v);
      if (v === '' || !Number.isFinite(n) || n < min || n > max || (integer && !Number.isInteger(n))) {
        usage(`bad value '${v}' for ${a}`);
      }
      return n;
    };
    switch (a) {
      case '--nodes': o.nodes = value(); break;
      case '--scenario': o.scenario = value(); break;
      case '--seconds': o.seconds = num(value(), 0.001, 3600, false); break;
      case '--concurrency': o.concurrency = num(value(), 1, 100000, true); break;
      case '--samples': o.samples = value(); break;
      case '--locks': o.locks = num(value(), 1, 10000000, true); break;
      case '--waiters': o.waiters = num(value(), 1, 100000, true); break;
      case '--events': o.events = value(); break;
      case '--resource': o.resource = value(); break;
      case '--gate': o.gate = value(); break;
      case '--help': case '-h':
        process.stdout.write('node bench.js --nodes URL,... --scenario latency|throughput|handoff|memory|handoff-crowd ' +
          '[--seconds S] [--concurrency C] [--samples FILE] [--locks N] ' +
          '[--waiters W] [--events FILE] [--resource NAME] [--gate FIFO]\n');
        process.exit(0);
        break;
      default: usage(`unknown argument '${a}'`);
    }
  }
  if (!o.nodes) usage('--nodes is required');
  if (!o.scenario) usage('--scenario is required');
  if (!['latency', 'throughput', 'handoff', 'memory', 'handoff-crowd'].includes(o.scenario)) {
    usage(`unknown scenario '${o.scenario}'`);
  }
  if (o.scenario === 'handoff-crowd' && !o.events) usage('--events is required by --scenario handoff-crowd');
  o.endpoints = o.nodes.split(',').filter((s) => s.length > 0).map(parseUrl);
  if (o.endpoints.length === 0) usage('--nodes names no node');
  return o;
}

function parseUrl(s) {
  let u;
  try { u = new URL(s); } catch (e) { usage(`bad node URL '${s}'`); }
  if (u.protocol !== 'redis:') usage(`node URL must be redis://127.0.0.1:PORT, got '${s}'`);
  let host = u.hostname;
  if (host === 'localhost') host = '127.0.0.1';
  if (!/^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host)) usage(`loopback only: '${s}'`);
  const port = u.port === '' ? 6379 : Number(u.port);
  return { host, port };
}

const nowUs = () => Number(process.hrtime.bigint() / 1000n);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function percentile(sorted, p) {
  if (sorted.length === 0) return 0;
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil(p * sorted.length)));
  return sorted[rank - 1];
}

// A full GC before memory readings (node is not started with --expose-gc).
function gcFunction() {
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc');
}

// Five ioredis clients with default options; resolves once a majority is
// ready (a paused master never becomes ready: its commands wait in ioredis's
// offline queue and it simply never votes). Fails after 5 s.
async function makeClients(endpoints, label) {
  const clients = endpoints.map(({ host, port }) => {
    const c = new Redis({ host, port });
    let reported = false;
    c.on('error', (err) => {
      if (!reported) process.stderr.write(`bench.js: ${label} ${host}:${port}: ${err.message}\n`);
      reported = true;
    });
    return c;
  });
  const quorum = Math.floor(clients.length / 2) + 1;
  await new Promise((resolve, reject) => {
    let ready = 0;
    const timer = setTimeout(() => reject(new Error(
      `only ${ready} of ${clients.length} nodes ready after 5 s (need ${quorum}): nodes unreachable`)), 5000);
    for (const c of clients) {
      c.once('ready', () => {
        if (++ready === quorum) { clearTimeout(timer); resolve(); }
      });
    }
  });
  return clients;
}

function makeRedlock(clients) {
  return new Redlock(clients); // defaults, see the header
}

async function warmUp(redlock, prefix) {
  const lock = await redlock.acquire([`${prefix}:warmup`], TTL_MS);
  await lock.release();
}

async function latency(o, redlock, prefix) {
  const resource = [`${prefix}:latency`];
  const samples = [];
  let errors = 0;
  const start = nowUs();
  const deadline = start + o.seconds * 1e6;
  while (nowUs() < deadline) {
    const t0 = nowUs();
    try {
      const lock = await redlock.acquire(resource, TTL_MS);
      await lock.release();
      samples.push(nowUs() - t0);
    } catch (e) {
      errors++;
    }
  }
  return { samples, errors, seconds: (nowUs() - start) / 1e6 };
}

async function throughput(o, redlock, prefix) {
  const samples = [];
  let errors = 0;
  const cpu0 = process.cpuUsage();
  const start = nowUs();
  const deadline = start + o.seconds * 1e6;
  const worker = async (i) => {
    const resource = [`${prefix}:w${i}`];
    while (nowUs() < deadline) {
      const t0 = nowUs();
      try {
        const lock = await redlock.acquire(resource, TTL_MS);
        await lock.release();
        samples.push(nowUs() - t0);
      } catch (e) {
        errors++;
      }
    }
  };
  const workers = [];
  for (let i = 0; i < o.concurrency; i++) workers.push(worker(i));
  await Promise.all(workers);
  const seconds = (nowUs() - start) / 1e6;
  const cpu = process.cpuUsage(cpu0);
  const cpuUsPerOp = samples.length > 0 ? (cpu.user + cpu.system) / samples.length : 0;
  return { samples, errors, seconds, extra: { concurrency: o.concurrency, cpu_us_per_op: round3(cpuUsPerOp) } };
}

async function handoff(o, holder, waiter, prefix) {
  const resource = [`${prefix}:handoff`];
  const samples = [];
  let errors = 0;
  let failedAttempts = 0;
  let attempts = 0;
  let refusals = 0; // ResourceLockedError events of the waiter (one per node per attempt)
  waiter.on('error', (err) => { if (err && err.name === 'ResourceLockedError') refusals++; });
  const quorum = Math.floor(o.endpoints.length / 2) + 1;
  const maxDelay = holder.settings.retryDelay + holder.settings.retryJitter;
  const start = nowUs();
  const deadline = start + o.seconds * 1e6;
  do {
    let held;
    try {
      held = await holder.acquire(resource, TTL_MS);
    } catch (e) {
      errors++;
      await sleep(10);
      continue;
    }
    refusals = 0;
    let releasedAt = null;
    const waiting = waiter.acquire(resource, TTL_MS).then(
      (lock) => ({ lock, at: nowUs() }),
      (err) => ({ err, at: nowUs() }));
    // The waiter is waiting once a majority refused its first attempt.
    const waitStart = nowUs();
    while (refusals < quorum && nowUs() - waitStart < 5e6) await sleep(1);
    await sleep(Math.floor(Math.random() * maxDelay));
    try {
      await held.release();
      releasedAt = nowUs();
    } catch (e) {
      errors++;
    }
    const got = await waiting;
    if (got.err || releasedAt === null) {
      errors++;
      if (got.err) process.stderr.write(`bench.js: handoff: waiter failed: ${got.err.message}\n`);
    } else {
      samples.push(Math.max(0, got.at - releasedAt));
      // The first attempt (refused by a majority before the release) is
      // where the wait begins; failed attempts are the later ones that lost.
      attempts += got.lock.attempts.length;
      failedAttempts += Math.max(got.lock.attempts.length - 2, 0);
    }
    if (got.lock) {
      try { await got.lock.release(); } catch (e) { errors++; }
    }
  } while (nowUs() < deadline);
  const seconds = (nowUs() - start) / 1e6;
  const extra = {};
  if (samples.length > 0) {
    extra.failed_attempts_per_handoff = round3(failedAttempts / samples.length);
    extra.attempts_per_handoff = round3(attempts / samples.length);
  }
  return { samples, errors, seconds, extra };
}

const nowNs = () => process.hrtime.bigint();

// passGate: "ready PID" to the FIFO, then wait for the line "go" on stdin.
async function passGate(fifo) {
  fs.writeFileSync(fifo, `ready ${process.pid}\n`);
  await new Promise((resolve, reject) => {
    let buf = '';
    process.stdin.setEncoding('utf8');
    process.stdin.on('data', (d) => {
      buf += d;
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      const line = buf.slice(0, nl);
      if (line === 'go') resolve(); else reject(new Error(`--gate: expected "go" on stdin, got "${line}"`));
    });
    process.stdin.on('end', () => reject(new Error('--gate: stdin ended before "go"')));
  });
  process.stdin.pause();
}

async function crowd(o, redlock) {
  const resource = [o.resource];
  const events = [];
  const open = [];
  const waits = [];
  let errors = 0;
  let gaveUp = 0;
  let stopping = false;
  const startNs = nowNs();
  let stopNs = 0n;
  const timer = setTimeout(() => { stopping = true; stopNs = nowNs(); }, o.seconds * 1000);
  const waiter = async (id) => {
    while (!stopping) {
      const waitStarted = nowNs();
      let lock = null;
      while (!lock) {
        try {
          lock = await redlock.acquire(resource, TTL_MS);
        } catch (e) {
          if (e instanceof ExecutionError) {
            gaveUp++;
          } else {
            errors++;
            process.stderr.write(`bench.js: handoff-crowd: waiter ${id}: ${e && e.message ? e.message : e}\n`);
          }
          if (stopping) break;
        }
      }
      if (!lock) {
        open.push(`open ${id} ${waitStarted} ${nowNs()}`);
        return;
      }
      const acquired = nowNs();
      waits.push(Number((acquired - waitStarted) / 1000n));
      await sleep(1 + Math.floor(Math.random() * 5));
      const releaseStarted = nowNs();
      try {
        await lock.release();
      } catch (e) {
        errors++;
        process.stderr.write(`bench.js: handoff-crowd: waiter ${id} release: ${e && e.message ? e.message : e}\n`);
      }
      events.push(`acq ${id} ${waitStarted} ${acquired} ${releaseStarted} ${nowNs()}`);
    }
  };
  const all = [];
  for (let i = 0; i < o.waiters; i++) all.push(waiter(i));
  await Promise.all(all);
  clearTimeout(timer);
  if (stopNs === 0n) stopNs = nowNs();
  process.stderr.write(`bench.js: handoff-crowd: ${gaveUp} acquire() calls ran out of retries and were called again\n`);
  fs.writeFileSync(o.events, [`crowd ${SYSTEM} ${process.pid} ${o.waiters} ${startNs} ${stopNs} ${errors}`,
    ...events, ...open].join('\n') + '\n');
  return { samples: waits, errors, seconds: Number(nowNs() - startNs) / 1e9, extra: { waiters: o.waiters } };
}

async function memory(o, redlock, prefix) {
  const gc = gcFunction();
  const n = o.locks;
  const locks = new Array(n);
  let errors = 0;
  gc();
  const before = process.memoryUsage();
  const start = nowUs();
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      try {
        locks[i] = await redlock.acquire([`${prefix}:m${i}`], MEMORY_TTL_MS);
      } catch (e) {
        errors++;
      }
    }
  };
  const workers = [];
  for (let w = 0; w < MEMORY_WORKERS; w++) workers.push(worker());
  await Promise.all(workers);
  const seconds = (nowUs() - start) / 1e6;
  // Let the last replies (stragglers after each quorum) land, then collect.
  await sleep(100);
  gc();
  const after = process.memoryUsage();
  const held = locks.filter(Boolean).length;
  // Release them all (not timed).
  next = 0;
  const releaser = async () => {
    while (next < n) {
      const i = next++;
      if (locks[i]) {
        try { await locks[i].release(); } catch (e) { errors++; }
        locks[i] = null;
      }
    }
  };
  const releasers = [];
  for (let w = 0; w < MEMORY_WORKERS; w++) releasers.push(releaser());
  await Promise.all(releasers);
  return {
    samples: null, errors, seconds, ops: held,
    extra: {
      locks: held,
      rss_before: before.rss, rss_after: after.rss,
      bytes_per_lock: round3((after.rss - before.rss) / Math.max(1, held)),
      heap_bytes_per_lock: round3((after.heapUsed - before.heapUsed) / Math.max(1, held)),
    },
  };
}

function round3(x) { return Math.round(x * 1000) / 1000; }

function emit(obj) {
  return new Promise((resolve) => process.stdout.write(JSON.stringify(obj) + '\n', resolve));
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const prefix = `bench:node:${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
  const allClients = [];
  let result;
  try {
    const clients = await makeClients(o.endpoints, 'client');
    allClients.push(...clients);
    const redlock = makeRedlock(clients);
    process.stderr.write(`bench.js: redlock settings ${JSON.stringify(redlock.settings)}\n`);
    await warmUp(redlock, prefix);
    if (o.gate) await passGate(o.gate);
    if (o.scenario === 'latency') {
      result = await latency(o, redlock, prefix);
    } else if (o.scenario === 'throughput') {
      result = await throughput(o, redlock, prefix);
    } else if (o.scenario === 'handoff-crowd') {
      result = await crowd(o, redlock);
    } else if (o.scenario === 'handoff') {
      const waiterClients = await makeClients(o.endpoints, 'waiter');
      allClients.push(...waiterClients);
      const waiter = makeRedlock(waiterClients);
      await warmUp(waiter, `${prefix}:waiter`);
      result = await handoff(o, redlock, waiter, prefix);
    } else {
      result = await memory(o, redlock, prefix);
    }
  } catch (e) {
    process.stderr.write(`bench.js: ${o.scenario} failed: ${e && e.message ? e.message : e}\n`);
    for (const c of allClients) c.disconnect();
    process.exit(1);
  }

  const out = { system: SYSTEM, scenario: o.scenario };
  if (result.samples) {
    const sorted = Float64Array.from(result.samples).sort();
    out.ops = result.samples.length;
    out.seconds = round3(result.seconds);
    out.ops_per_s = Math.round((result.samples.length / result.seconds) * 10) / 10;
    out.p50_us = percentile(sorted, 0.5);
    out.p90_us = percentile(sorted, 0.9);
    out.p99_us = percentile(sorted, 0.99);
    out.p999_us = percentile(sorted, 0.999);
    if (o.samples) fs.writeFileSync(o.samples, result.samples.map((s) => `${s}\n`).join(''));
  } else {
    out.ops = result.ops;
    out.seconds = round3(result.seconds);
    out.ops_per_s = Math.round((result.ops / result.seconds) * 10) / 10;
  }
  Object.assign(out, result.extra || {});
  out.errors = result.errors;
  await emit(out);
  // disconnect(), not quit(): a paused master would never answer QUIT.
  for (const c of allClients) c.disconnect();
  // A crowd process whose waiters all lost every race did its part: the
  // merge of the whole crowd decides (and reports them as starved).
  const ok = o.scenario === 'handoff-crowd' || (result.samples ? result.samples.length > 0 : result.ops > 0);
  if (!ok) process.stderr.write(`bench.js: ${o.scenario}: nothing completed\n`);
  process.exit(ok ? 0 : 1);
}

main();
