// bigseg's Redis-protocol listener (BIGSEG_RESP_ADDR) under LaunchDarkly's own Redis Big Segment
// store for Node, @launchdarkly/node-server-sdk-redis (ioredis), in the real
// @launchdarkly/node-server-sdk: no code of ours between the SDK and bigseg. The same cases run
// against the SDK's store reading real Redis directly, as the reference every answer through
// bigseg must equal, and MONITOR on that Redis records what the store sends.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';

import * as ld from '@launchdarkly/node-server-sdk';
import { RedisBigSegmentStore } from '@launchdarkly/node-server-sdk-redis';
import { Redis } from 'ioredis';

import {
  LDLayout,
  RedisClient,
  connectSharedRedis,
  hashOf,
  haveRedisServer,
  serverBinary,
  sharedRedisAddress,
  startBigseg,
  startRedis,
  testPrefix,
  waitFor,
} from './support.mjs';

// The flag and the Big Segment of e2e.test.mjs: "new-checkout" serves IN to the members of the
// unbounded segment "beta-testers", generation 3 (ref "beta-testers.g3"), whose own rule (tier
// "gold") applies only to contexts the Big Segment data does not name.
const FLAG = 'new-checkout';
const REF = 'beta-testers.g3';
const IN = 'in-segment';
const OUT = 'everyone-else';
const FLAG_JSON = {
  key: FLAG,
  version: 1,
  on: true,
  salt: 'f',
  variations: [OUT, IN],
  offVariation: 0,
  fallthrough: { variation: 0 },
  rules: [{ id: 'beta', variation: 1, clauses: [{ attribute: 'key', op: 'segmentMatch', values: ['beta-testers'] }] }],
};
const SEGMENT_JSON = {
  key: 'beta-testers',
  version: 1,
  salt: 's',
  unbounded: true,
  generation: 3,
  rules: [{ id: 'gold', clauses: [{ attribute: 'tier', op: 'in', values: ['gold'] }] }],
};

// What the Big Segment data says of each context, and the flag's value for it.
const CASES = [
  { name: 'included', included: [REF], value: IN },
  { name: 'excluded', excluded: [REF], tier: 'gold', value: OUT }, // the segment's rule would match
  { name: 'in both', included: [REF], excluded: [REF], value: IN }, // included wins
  { name: 'unknown', value: OUT },
  { name: 'unknown, tier gold', tier: 'gold', value: IN }, // the segment's own rule applies
  { name: 'in other segments', included: ['other-segment.g1'], excluded: ['another.g2'], value: OUT },
  { name: 'in an earlier generation', included: ['beta-testers.g2'], value: OUT },
];

const redis = await connectSharedRedis();
const noRedis = redis ? false : `no Redis at ${sharedRedisAddress().url}; set BIGSEG_TEST_REDIS_URL, or BIGSEG_TEST_REQUIRE_REDIS=1 to fail instead`;
const noRedisServer = (await haveRedisServer()) ? false : 'redis-server is not installed';
let server;

before(async () => {
  if (noRedis) return;
  server = await serverBinary();
});

after(() => {
  if (redis) redis.close();
  if (server) server.cleanup();
});

/**
 * Runs fn when the test t ends, after the cleanups registered later (t.after runs its hooks in
 * the order registered): an SDK client closes before the bigseg or Redis it reads stops. The
 * other way round, ioredis may reconnect for ever (see the refused tokens below).
 */
const cleanups = new WeakMap();
function defer(t, fn) {
  if (!cleanups.has(t)) {
    const fns = [];
    cleanups.set(t, fns);
    t.after(async () => {
      for (const f of fns.reverse()) await f();
    });
  }
  cleanups.get(t).push(fn);
}

/** A logger keeping every line, for checks and for failure output. */
function captureLogger() {
  const lines = [];
  const at = (level) => (...args) => lines.push(`${level}: ${args.join(' ')}`);
  return { lines, error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug') };
}

/**
 * A real SDK client (test data source, no events) whose Big Segment store is storeFactory;
 * status polled every 50 ms. Closed when the test ends.
 */
async function sdkClient(t, storeFactory, logger = captureLogger()) {
  const td = new ld.integrations.TestData();
  await td.usePreconfiguredFlag(FLAG_JSON);
  await td.usePreconfiguredSegment(SEGMENT_JSON);
  const client = ld.init('sdk-key-unused-offline', {
    updateProcessor: td.getFactory(),
    sendEvents: false,
    diagnosticOptOut: true,
    logger,
    bigSegments: { store: storeFactory, statusPollInterval: 0.05 },
  });
  defer(t, () => client.close());
  await client.waitForInitialization({ timeout: 10 });
  return client;
}

/** The flag's evaluation detail for a user with key (and tier). */
function evaluate(client, key, tier) {
  return client.variationDetail(FLAG, { kind: 'user', key, ...(tier ? { tier } : {}) }, 'default');
}

/** Its value and bigSegmentsStatus only. */
async function outcome(client, key, tier) {
  const d = await evaluate(client, key, tier);
  return { value: d.value, status: d.reason.bigSegmentsStatus };
}

/** Waits until the SDK's Big Segment store status is want ({available, stale}). */
async function waitStatus(client, want) {
  await waitFor(`the SDK to report the Big Segment store ${JSON.stringify(want)}`, () => {
    const st = client.bigSegmentStoreStatusProvider.getStatus();
    return st !== undefined && st.available === want.available && st.stale === want.stale;
  });
}

/** A bigseg process with its Redis-protocol listener on a free port; stopped when the test ends. */
async function bigseg(t, settings) {
  const p = await startBigseg(server.bin, { BIGSEG_RESP_ADDR: '127.0.0.1:0', ...settings });
  defer(t, () => p.stop());
  const line = p
    .log()
    .split('\n')
    .map((l) => {
      try {
        return JSON.parse(l);
      } catch {
        return {};
      }
    })
    .find((l) => l.msg === 'Redis-protocol listener');
  assert.ok(line, `bigseg logged no Redis-protocol listener:\n${p.log()}`);
  const [host, port] = line.addr.split(':');
  return { ...p, respHost: host, respPort: Number(port), respUrl: `redis://${line.addr}` };
}

/** bigseg's bigseg_resp_commands_total, as {"command result": count}. */
async function respCommands(p) {
  const text = await (await fetch(`${p.url}/metrics`)).text();
  const counts = {};
  for (const m of text.matchAll(/^bigseg_resp_commands_total\{command="([^"]+)",result="([^"]+)"\} (\S+)$/gm)) {
    if (Number(m[3]) > 0) counts[`${m[1]} ${m[2]}`] = Number(m[3]);
  }
  return counts;
}

/** Writes the data of CASES for the keys `${phase}/${name}` of every phase, under a layout. */
async function writeCases(layout, phases) {
  for (const phase of phases) {
    for (const c of CASES) await layout.setMembership(hashOf(`${phase}/${c.name}`), c.included, c.excluded);
  }
}

/**
 * MONITOR on the Redis at port: every command it runs afterwards, with the address of the
 * client that sent it (Redis shows neither AUTH nor HELLO's arguments).
 */
async function monitor(t, port) {
  const socket = net.connect(port, '127.0.0.1');
  await once(socket, 'connect');
  defer(t, () => socket.destroy());
  const seen = [];
  let pending = '';
  let started;
  const ok = new Promise((resolve) => {
    started = resolve;
  });
  socket.setEncoding('utf8');
  socket.on('data', (chunk) => {
    pending += chunk;
    let nl;
    while ((nl = pending.indexOf('\r\n')) >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 2);
      if (line === '+OK') started();
      const m = /^\+\d+\.\d+ \[\d+ ([^\]]+)\] (.*)$/.exec(line);
      if (m) seen.push({ addr: m[1], args: parseMonitorArgs(m[2]) });
    }
  });
  socket.write('MONITOR\r\n');
  await ok;
  return seen;
}

/** The arguments of a MONITOR line: double-quoted, with Redis's escapes. */
function parseMonitorArgs(s) {
  const args = [];
  let i = 0;
  while (i < s.length) {
    if (s[i] === ' ') {
      i += 1;
      continue;
    }
    assert.equal(s[i], '"', `unexpected MONITOR line: ${s}`);
    i += 1;
    let v = '';
    while (i < s.length && s[i] !== '"') {
      if (s[i] !== '\\') {
        v += s[i];
        i += 1;
      } else if (s[i + 1] === 'x') {
        v += String.fromCharCode(parseInt(s.slice(i + 2, i + 4), 16));
        i += 4;
      } else {
        v += { n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b' }[s[i + 1]] ?? s[i + 1];
        i += 2;
      }
    }
    i += 1;
    args.push(v);
  }
  return args;
}

/** A command as the report shows it: a context's hash as {hash}, so that repeats collapse. */
function shape(args) {
  return args.map((a) => a.replace(/:big_segment_(include|exclude):.*$/, ':big_segment_$1:{hash}')).join(' ');
}

test('through bigseg, the SDK evaluates exactly as against Redis with the same data', { skip: noRedis || noRedisServer }, async (t) => {
  const phases = ['healthy', 'stale', 'never synchronized'];
  // The reference: a private Redis, read by the SDK's store directly, under MONITOR.
  const ref = await startRedis();
  defer(t, () => ref.remove());
  const refWriter = await RedisClient.connect(ref.port);
  defer(t, () => refWriter.close());
  const prefix = testPrefix(t.name);
  const refData = new LDLayout(refWriter, prefix);
  // bigseg reads the same data from the shared Redis, under the same prefix.
  const data = new LDLayout(redis, prefix);
  defer(t, () => data.clear());
  for (const l of [refData, data]) {
    await writeCases(l, phases);
    await l.setSynchronizedNow();
  }
  const seen = await monitor(t, ref.port);
  const writerAddr = `127.0.0.1:${refWriter.socket.localPort}`;

  const p = await bigseg(t, { BIGSEG_REDIS_URL: sharedRedisAddress().url, BIGSEG_PREFIX: prefix });
  const viaRedis = await sdkClient(t, RedisBigSegmentStore({ redisOpts: { host: '127.0.0.1', port: ref.port }, prefix }));
  const viaBigseg = await sdkClient(t, RedisBigSegmentStore({ redisOpts: { host: p.respHost, port: p.respPort }, prefix }));

  const setBoth = async (f) => {
    await f(refData);
    await f(data);
  };
  const phaseSetup = {
    healthy: { status: 'HEALTHY', want: { available: true, stale: false }, write: async () => {} },
    stale: { status: 'STALE', want: { available: true, stale: true }, write: () => setBoth((l) => l.setSynchronizedOn(Date.now() - 3600 * 1000)) },
    'never synchronized': {
      status: 'STALE',
      want: { available: true, stale: true },
      write: () => setBoth((l) => l.c.command('DEL', `${prefix}:big_segments_synchronized_on`)),
    },
  };
  for (const phase of phases) {
    await t.test(phase, async () => {
      const { status, want, write } = phaseSetup[phase];
      await write();
      await waitStatus(viaRedis, want);
      await waitStatus(viaBigseg, want);
      for (const c of CASES) {
        const key = `${phase}/${c.name}`;
        const reference = await evaluate(viaRedis, key, c.tier);
        const got = await evaluate(viaBigseg, key, c.tier);
        assert.deepEqual(got, reference, `${key}: through bigseg differs from Redis`);
        assert.deepEqual({ value: got.value, status: got.reason.bigSegmentsStatus }, { value: c.value, status }, key);
      }
    });
  }

  await t.test('the store sends GET of synchronized_on, then SMEMBERS include and exclude', async () => {
    const hashes = phases.flatMap((phase) => CASES.map((c) => hashOf(`${phase}/${c.name}`)));
    const last = `${prefix}:big_segment_exclude:${hashes.at(-1)}`;
    await waitFor('MONITOR to show the last SMEMBERS', () => seen.some((s) => s.args[1] === last));
    const sent = seen.filter((s) => s.addr !== writerAddr).map((s) => s.args);
    const reads = sent.filter((a) => ['GET', 'SMEMBERS'].includes(a[0].toUpperCase()));
    for (const a of reads.filter((a) => a[0].toUpperCase() === 'GET')) {
      assert.deepEqual([a[0].toUpperCase(), ...a.slice(1)], ['GET', `${prefix}:big_segments_synchronized_on`]);
    }
    const smembers = reads.filter((a) => a[0].toUpperCase() === 'SMEMBERS').map((a) => a[1]);
    const pairs = hashes.flatMap((h) => [`${prefix}:big_segment_include:${h}`, `${prefix}:big_segment_exclude:${h}`]);
    assert.deepEqual(smembers, pairs, 'one SMEMBERS include then exclude per context, in evaluation order');
    const others = [...new Set(sent.filter((a) => !['GET', 'SMEMBERS'].includes(a[0].toUpperCase())).map(shape))];
    for (const o of others) assert.match(o, /^(info|client setinfo (LIB-NAME|LIB-VER) \S+)$/i, 'a command other than what ioredis sends on connecting');
    t.diagnostic(`sent to Redis by @launchdarkly/node-server-sdk-redis: ${[...new Set(sent.map(shape))].join(' | ')}`);

    // bigseg answered the same commands, every one of them without an error.
    const counts = await respCommands(p);
    t.diagnostic(`bigseg's bigseg_resp_commands_total: ${JSON.stringify(counts)}`);
    assert.deepEqual(
      Object.keys(counts).filter((k) => !k.endsWith(' ok')),
      [],
      'bigseg answered a command with an error, or one it does not know',
    );
    assert.equal(counts['smembers ok'], smembers.length, 'bigseg answered as many SMEMBERS as Redis');
    for (const k of ['get ok', 'info ok']) assert.ok(counts[k] > 0, `bigseg answered no ${k}`);
  });
});

test("STORE_ERROR while bigseg's Redis is down, and healthy again once it is back", { skip: noRedis || noRedisServer }, async (t) => {
  const r = await startRedis();
  defer(t, () => r.remove());
  const write = async (...keys) => {
    const c = await RedisClient.connect(r.port);
    try {
      const data = new LDLayout(c, 'launchdarkly'); // both default to this prefix
      await data.setSynchronizedNow();
      for (const key of keys) await data.setMembership(hashOf(key), [REF]);
    } finally {
      c.close();
    }
  };
  await write('alice-1', 'alice-2');
  const p = await bigseg(t, { BIGSEG_REDIS_URL: `${r.url}?dial_timeout=200ms` });
  const logger = captureLogger();
  const client = await sdkClient(t, RedisBigSegmentStore({ redisOpts: { host: p.respHost, port: p.respPort } }), logger);
  await waitStatus(client, { available: true, stale: false });
  assert.deepEqual(await outcome(client, 'alice-1'), { value: IN, status: 'HEALTHY' }, 'before');

  await r.stop();
  await waitStatus(client, { available: false, stale: false });
  assert.deepEqual(await outcome(client, 'alice-2'), { value: OUT, status: 'STORE_ERROR' }, 'while Redis is down');
  assert.ok(
    logger.lines.some((l) => l.includes('Big Segment store status query returned error') && l.includes('the Big Segment store is unavailable')),
    `the SDK did not log GET's error: ${logger.lines.join('\n')}`,
  );
  assert.ok(
    logger.lines.some((l) => l.includes('Big Segment store membership query returned error') && l.includes('could not be read')),
    `the SDK did not log SMEMBERS's error: ${logger.lines.join('\n')}`,
  );
  // The replies themselves, as any client gets them.
  const c = await RedisClient.connect(p.respPort, p.respHost);
  defer(t, () => c.close());
  await assert.rejects(c.command('GET', 'launchdarkly:big_segments_synchronized_on'), /^Error: ERR the Big Segment store is unavailable$/);
  await assert.rejects(c.command('SMEMBERS', `launchdarkly:big_segment_include:${hashOf('alice-2')}`), /^Error: ERR the Big Segment store could not be read$/);

  await r.start(); // empty: it saves nothing; the synchronizer writes again
  await write('alice-3');
  await waitStatus(client, { available: true, stale: false });
  assert.deepEqual(await outcome(client, 'alice-3'), { value: IN, status: 'HEALTHY' }, 'after');
});

test('the API token is the Redis password (AUTH)', { skip: noRedis }, async (t) => {
  const token = 'resp-T0ken_one';
  const otherToken = 'resp-T0ken_two';
  const prefix = testPrefix(t.name);
  const data = new LDLayout(redis, prefix);
  defer(t, () => data.clear());
  await data.setSynchronizedNow();
  const keys = ['password', 'username and password', 'URL', 'wrong token', 'no token'];
  for (const key of keys) await data.setMembership(hashOf(key), [REF]);
  const p = await bigseg(t, { BIGSEG_REDIS_URL: sharedRedisAddress().url, BIGSEG_PREFIX: prefix, BIGSEG_API_TOKENS: `${otherToken},${token}` });
  const at = { host: p.respHost, port: p.respPort };

  const accepted = [
    ['password', () => RedisBigSegmentStore({ redisOpts: { ...at, password: token }, prefix })], // AUTH token
    ['username and password', () => RedisBigSegmentStore({ redisOpts: { ...at, username: 'default', password: token }, prefix })], // AUTH default token
    [
      'URL', // the store has no URL option: an ioredis client of one's own, which the store then leaves open
      (t) => {
        const own = new Redis(`redis://:${encodeURIComponent(token)}@${p.respHost}:${p.respPort}`);
        own.on('error', () => {}); // reported to the SDK through its commands
        defer(t, () => own.disconnect());
        return RedisBigSegmentStore({ client: own, prefix });
      },
    ],
  ];
  for (const [key, store] of accepted) {
    await t.test(`accepted: ${key}`, async (t) => {
      const logger = captureLogger();
      const client = await sdkClient(t, store(t), logger);
      await waitStatus(client, { available: true, stale: false });
      assert.deepEqual(await outcome(client, key), { value: IN, status: 'HEALTHY' });
      assert.ok(!logger.lines.some((l) => l.includes(token)), 'an SDK log line holds the token');
    });
  }

  const refused = [
    ['wrong token', { ...at, password: `not-${token}` }, 'WRONGPASS'],
    ['no token', at, 'NOAUTH'],
  ];
  for (const [key, redisOpts, error] of refused) {
    await t.test(`refused: ${key}`, async (t) => {
      // The ioredis client the store would make of redisOpts, but our own: refused, ioredis
      // reconnects for ever, and the store's close() (a QUIT, queued behind the polls) does not
      // stop it; against Redis with a wrong password as well. disconnect() does.
      const own = new Redis(redisOpts);
      own.on('error', () => {}); // reported to the SDK through its commands
      defer(t, () => own.disconnect());
      const logger = captureLogger();
      const client = await sdkClient(t, RedisBigSegmentStore({ client: own, prefix }), logger);
      await waitStatus(client, { available: false, stale: false });
      assert.deepEqual(await outcome(client, key), { value: OUT, status: 'STORE_ERROR' });
      assert.ok(
        logger.lines.some((l) => l.startsWith('error:') && l.includes(error)),
        `no ${error} in the SDK's error log: ${logger.lines.join('\n')}`,
      );
      for (const secret of [token, otherToken, `not-${token}`]) {
        assert.ok(!logger.lines.some((l) => l.includes(secret)), 'an SDK log line holds a token');
      }
    });
  }

  await t.test('the replies', async (t) => {
    const c = await RedisClient.connect(p.respPort, p.respHost);
    defer(t, () => c.close());
    const synced = `${prefix}:big_segments_synchronized_on`;
    await assert.rejects(c.command('GET', synced), /^Error: NOAUTH Authentication required\.$/);
    await assert.rejects(c.command('AUTH', `not-${token}`), /^Error: WRONGPASS /);
    assert.equal(await c.command('AUTH', 'any-user-name', token), 'OK');
    assert.match(await c.command('GET', synced), /^\d+$/);
  });
});
