// Real parts for the tests: the bigseg server binary (built from this repository and run as a
// process), the shared Redis (BIGSEG_TEST_REDIS_URL, default redis://127.0.0.1:6379) under a
// key prefix per test, private redis-server processes, and a small Redis client to write the
// LaunchDarkly layout with (RESP over a socket: no client library needed).

import { spawn, execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

/** A context key's hash, as the SDKs and bigseg compute it. */
export function hashOf(key) {
  return createHash('sha256').update(key).digest('base64');
}

/** Polls cond until it is true, failing after timeoutMs (a bound, not a timing). */
export async function waitFor(what, cond, timeoutMs = 15000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10)); // polling a condition
  }
}

// --- the bigseg binary ---

function repoRoot() {
  let dir = here;
  for (;;) {
    const gomod = path.join(dir, 'go.mod');
    if (existsSync(gomod) && /^module github\.com\/bigseg\/bigseg\s*$/m.test(readFileSync(gomod, 'utf8'))) return dir;
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error('no parent directory holds the go.mod of github.com/bigseg/bigseg');
    dir = parent;
  }
}

/**
 * The bigseg server binary: BIGSEG_SERVER_BIN if set, else built with "go build ./cmd/server"
 * in the repository's root into a temporary directory; cleanup() removes it.
 */
export async function serverBinary() {
  if (process.env.BIGSEG_SERVER_BIN) return { bin: process.env.BIGSEG_SERVER_BIN, cleanup() {} };
  const dir = mkdtempSync(path.join(tmpdir(), 'bigseg-node-test-'));
  const bin = path.join(dir, 'server');
  try {
    await promisify(execFile)('go', ['build', '-o', bin, './cmd/server'], { cwd: repoRoot() });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`go build ./cmd/server: ${err.message}\n${err.stderr || ''}`);
  }
  return { bin, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

// --- bigseg processes ---

/**
 * Starts bigseg with settings (an object of BIGSEG_* variables; no other environment) on a
 * free loopback port, and resolves once its first status poll has completed.
 */
export async function startBigseg(bin, settings = {}) {
  const env = { BIGSEG_ADDR: '127.0.0.1:0', BIGSEG_SHUTDOWN_DELAY: '0s', BIGSEG_STATUS_POLL_INTERVAL: '50ms', ...settings };
  const child = spawn(bin, [], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const addr = await new Promise((resolve, reject) => {
    let pending = '';
    const timer = setTimeout(() => reject(new Error(`bigseg did not listen within 30s:\n${log}`)), 30000);
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk) => {
      log += chunk;
      pending += chunk;
      let nl;
      while ((nl = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        try {
          const l = JSON.parse(line);
          if (l.msg === 'listening') {
            clearTimeout(timer);
            resolve(l.addr);
          }
        } catch {
          // not a JSON line
        }
      }
    });
    exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`bigseg exited (${code}) before listening:\n${log}`));
    });
  });
  const p = {
    addr,
    url: `http://${addr}`,
    settings,
    log: () => log,
    /** GET /status, or with env GET /environments/{env}/status. */
    async status(env) {
      const res = await fetch(env ? `${p.url}/environments/${env}/status` : `${p.url}/status`);
      return res.json();
    },
    async waitStatus(what, cond, env) {
      await waitFor(`bigseg ${what}${env ? ` in ${env}` : ''}`, async () => {
        try {
          return cond(await p.status(env));
        } catch {
          return false;
        }
      });
    },
    /** SIGTERM, and wait for the exit. */
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
    /** SIGKILL, as a crash. */
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
    /** Starts it again with the same settings on the same address. */
    restart: () => startBigseg(bin, { ...settings, BIGSEG_ADDR: addr }),
  };
  try {
    // With several environments (BIGSEG_ENVIRONMENTS), /status is each one's, by name.
    const polled = (st) => st.checkedAt !== null && st.checkedAt !== undefined;
    await p.waitStatus('first status poll', (st) => (st.environments ? Object.values(st.environments).every(polled) : polled(st)));
  } catch (err) {
    await p.kill();
    throw err;
  }
  return p;
}

// --- Redis ---

/** A minimal Redis client: one connection, commands answered in order. */
export class RedisClient {
  static connect(port, host = '127.0.0.1') {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, host);
      socket.once('connect', () => resolve(new RedisClient(socket)));
      socket.once('error', reject);
    });
  }

  constructor(socket) {
    this.socket = socket;
    this.buf = Buffer.alloc(0);
    this.pending = [];
    socket.on('data', (d) => {
      this.buf = Buffer.concat([this.buf, d]);
      this.drain();
    });
    const fail = (err) => {
      for (const p of this.pending.splice(0)) p.reject(err || new Error('Redis connection closed'));
    };
    socket.on('error', fail);
    socket.on('close', () => fail());
  }

  /** Sends one command; resolves with its reply (an error reply rejects). */
  command(...args) {
    let out = `*${args.length}\r\n`;
    for (const a of args) {
      const s = String(a);
      out += `$${Buffer.byteLength(s)}\r\n${s}\r\n`;
    }
    return new Promise((resolve, reject) => {
      this.pending.push({ resolve, reject });
      this.socket.write(out);
    });
  }

  drain() {
    while (this.pending.length > 0) {
      const r = parseReply(this.buf, 0);
      if (!r) return;
      this.buf = this.buf.subarray(r.end);
      const p = this.pending.shift();
      if (r.value instanceof Error) p.reject(r.value);
      else p.resolve(r.value);
    }
  }

  close() {
    this.socket.destroy();
  }
}

function parseReply(buf, i) {
  if (i >= buf.length) return null;
  const nl = buf.indexOf('\r\n', i);
  if (nl < 0) return null;
  const line = buf.toString('utf8', i + 1, nl);
  switch (String.fromCharCode(buf[i])) {
    case '+':
      return { value: line, end: nl + 2 };
    case '-':
      return { value: new Error(line), end: nl + 2 };
    case ':':
      return { value: Number(line), end: nl + 2 };
    case '$': {
      const n = Number(line);
      if (n < 0) return { value: null, end: nl + 2 };
      if (buf.length < nl + 2 + n + 2) return null;
      return { value: buf.toString('utf8', nl + 2, nl + 2 + n), end: nl + 4 + n };
    }
    case '*': {
      const n = Number(line);
      if (n < 0) return { value: null, end: nl + 2 };
      const arr = [];
      let at = nl + 2;
      for (let k = 0; k < n; k++) {
        const r = parseReply(buf, at);
        if (!r) return null;
        arr.push(r.value);
        at = r.end;
      }
      return { value: arr, end: at };
    }
    default:
      throw new Error(`unexpected Redis reply type ${buf[i]}`);
  }
}

/** The shared test Redis's port and host (BIGSEG_TEST_REDIS_URL, default 127.0.0.1:6379). */
export function sharedRedisAddress() {
  const u = new URL(process.env.BIGSEG_TEST_REDIS_URL || 'redis://127.0.0.1:6379');
  return { url: u.href.replace(/\/$/, ''), host: u.hostname, port: Number(u.port || 6379) };
}

/**
 * Connects to the shared Redis; resolves undefined when none answers (the tests then skip,
 * unless BIGSEG_TEST_REQUIRE_REDIS=1, which makes this throw).
 */
export async function connectSharedRedis() {
  const { host, port, url } = sharedRedisAddress();
  try {
    const c = await RedisClient.connect(port, host);
    await c.command('PING');
    return c;
  } catch (err) {
    if (process.env.BIGSEG_TEST_REQUIRE_REDIS === '1') throw new Error(`no Redis at ${url}: ${err.message} (BIGSEG_TEST_REQUIRE_REDIS=1)`);
    return undefined;
  }
}

/** A key prefix no other test uses. */
export function testPrefix(name) {
  return `ldbigseg_node_${name.replace(/[^A-Za-z0-9_-]+/g, '_').slice(0, 40)}_${randomBytes(4).toString('hex')}`;
}

/** Writes Big Segments data in LaunchDarkly's Redis layout, as a synchronizer does. */
export class LDLayout {
  constructor(client, prefix) {
    this.c = client;
    this.prefix = prefix;
  }

  setSynchronizedOn(ms) {
    return this.c.command('SET', `${this.prefix}:big_segments_synchronized_on`, String(ms));
  }

  setSynchronizedNow() {
    return this.setSynchronizedOn(Date.now());
  }

  async setMembership(hash, included = [], excluded = []) {
    if (included.length) await this.c.command('SADD', `${this.prefix}:big_segment_include:${hash}`, ...included);
    if (excluded.length) await this.c.command('SADD', `${this.prefix}:big_segment_exclude:${hash}`, ...excluded);
  }

  /** Deletes every key under the prefix. */
  async clear() {
    let cursor = '0';
    do {
      const [next, keys] = await this.c.command('SCAN', cursor, 'MATCH', `${this.prefix}:*`, 'COUNT', 1000);
      if (keys.length) await this.c.command('DEL', ...keys);
      cursor = next;
    } while (cursor !== '0');
  }
}

/**
 * Writes a test's data under its prefix and, under the other prefixes (other environments'),
 * the opposite: each context's included refs excluded and its excluded refs included, and
 * fresh data stale and stale data fresh; so that a store reading another environment than its
 * own, or a bigseg answering with another's, evaluates differently.
 */
export class MirroredLayout extends LDLayout {
  constructor(client, prefix, otherPrefixes = []) {
    super(client, prefix);
    this.others = otherPrefixes.map((p) => new LDLayout(client, p));
  }

  /** The others get an hour before ms if it is fresh (within the SDK's 2 min), else now. */
  async setSynchronizedOn(ms) {
    await super.setSynchronizedOn(ms);
    const opposite = Date.now() - ms < 120000 ? ms - 3600000 : Date.now();
    for (const o of this.others) await o.setSynchronizedOn(opposite);
  }

  async setMembership(hash, included = [], excluded = []) {
    await super.setMembership(hash, included, excluded);
    for (const o of this.others) await o.setMembership(hash, excluded, included);
  }

  async clear() {
    await super.clear();
    for (const o of this.others) await o.clear();
  }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Whether redis-server can be started here. */
export async function haveRedisServer() {
  try {
    await promisify(execFile)('redis-server', ['--version']);
    return true;
  } catch {
    return false;
  }
}

/** A private redis-server on a free loopback port, which a test can stop and start again. */
export async function startRedis() {
  const port = await freePort();
  const dir = mkdtempSync(path.join(tmpdir(), 'bigseg-node-redis-'));
  let child;
  let exited;
  const r = {
    port,
    url: `redis://127.0.0.1:${port}`,
    async start() {
      child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], {
        stdio: 'ignore',
      });
      exited = new Promise((resolve) => child.once('exit', resolve));
      await waitFor('redis-server to answer PING', async () => {
        try {
          const c = await RedisClient.connect(port);
          try {
            return (await c.command('PING')) === 'PONG';
          } finally {
            c.close();
          }
        } catch {
          return false;
        }
      });
    },
    /** Stops it; its data is gone (it saves nothing). */
    async stop() {
      if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      if (exited) await exited;
    },
    async remove() {
      await r.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  await r.start();
  return r;
}
