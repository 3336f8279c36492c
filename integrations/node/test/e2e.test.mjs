// End to end: the real @launchdarkly/node-server-sdk, with its file data source and no events,
// reads Big Segments through the adapter from real bigseg processes over real Redis.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import * as ld from '@launchdarkly/node-server-sdk';
import { BigsegBigSegmentStore } from '@bigseg/node-server-sdk-bigseg';

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

// A flag whose rule matches the unbounded (Big) segment "beta-testers", generation 3: its ref
// in the Big Segments data is "beta-testers.g3". The segment has a rule of its own (tier
// "gold"), which the SDK applies only to contexts the Big Segment data does not mention: an
// excluded context with tier gold is still out, which makes the exclusion visible.
const FLAG = 'new-checkout';
const REF = 'beta-testers.g3';
const IN = 'in-segment';
const OUT = 'everyone-else';
const FLAG_DATA = {
  flags: {
    [FLAG]: {
      key: FLAG,
      version: 1,
      on: true,
      salt: 'f',
      variations: [OUT, IN],
      offVariation: 0,
      fallthrough: { variation: 0 },
      rules: [{ id: 'beta', variation: 1, clauses: [{ attribute: 'key', op: 'segmentMatch', values: ['beta-testers'] }] }],
    },
  },
  segments: {
    'beta-testers': {
      key: 'beta-testers',
      version: 1,
      salt: 's',
      unbounded: true,
      generation: 3,
      rules: [{ id: 'gold', clauses: [{ attribute: 'tier', op: 'in', values: ['gold'] }] }],
    },
  },
};

const redis = await connectSharedRedis();
const skip = redis ? false : `no Redis at ${sharedRedisAddress().url}; set BIGSEG_TEST_REDIS_URL, or BIGSEG_TEST_REQUIRE_REDIS=1 to fail instead`;
let server;
let dataDir;

before(async () => {
  if (skip) return;
  server = await serverBinary();
  dataDir = mkdtempSync(path.join(tmpdir(), 'bigseg-node-flags-'));
  writeFileSync(path.join(dataDir, 'flags.json'), JSON.stringify(FLAG_DATA));
});

after(() => {
  if (redis) redis.close();
  if (server) server.cleanup();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

/** A logger keeping every line, for checks and for failure output. */
function captureLogger() {
  const lines = [];
  const at = (level) => (...args) => lines.push(`${level}: ${args.join(' ')}`);
  return { lines, error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug') };
}

/** A real SDK client reading Big Segments through the adapter; status polled every 50 ms. */
async function sdkClient(t, baseUrl, bearerToken, logger = captureLogger()) {
  const files = new ld.integrations.FileDataSourceFactory({ paths: [path.join(dataDir, 'flags.json')] });
  const client = ld.init('sdk-key-unused-offline', {
    updateProcessor: files.getFactory(),
    sendEvents: false,
    diagnosticOptOut: true,
    logger,
    bigSegments: { store: BigsegBigSegmentStore({ baseUrl, bearerToken }), statusPollInterval: 0.05 },
  });
  t.after(() => {
    client.close();
  });
  await client.waitForInitialization({ timeout: 10 });
  return client;
}

/** Evaluates the flag for a user with key (and tier): its value and bigSegmentsStatus. */
async function evaluate(client, key, tier) {
  const detail = await client.variationDetail(FLAG, { kind: 'user', key, ...(tier ? { tier } : {}) }, 'default');
  return { value: detail.value, status: detail.reason.bigSegmentsStatus };
}

/** Waits until the client's Big Segment store status is available and fresh, or unavailable. */
async function waitAvailable(client, available) {
  await waitFor(`the SDK to report the Big Segment store available=${available}`, () => {
    const st = client.bigSegmentStoreStatusProvider.getStatus();
    return st !== undefined && st.available === available && st.stale === false;
  });
}

/** A bigseg process for the test, stopped when it ends (its log shown if it failed). */
async function bigseg(t, settings) {
  const p = await startBigseg(server.bin, settings);
  t.after(async () => {
    await p.stop();
  });
  return p;
}

/** A layout writer under a prefix of the test's own, cleared when it ends. */
function layout(t) {
  const l = new LDLayout(redis, testPrefix(t.name));
  t.after(() => l.clear());
  return l;
}

const healthy = { value: IN, status: 'HEALTHY' };
const storeError = { value: OUT, status: 'STORE_ERROR' };

test('the SDK evaluates Big Segment rules through bigseg', { skip }, async (t) => {
  const data = layout(t);
  await data.setSynchronizedNow();
  await data.setMembership(hashOf('alice'), [REF]);
  await data.setMembership(hashOf('bob'), [], [REF]);
  await data.setMembership(hashOf('erin'), ['other-segment.g1'], ['another.g2']);
  const token = 'e2e-T0ken_one';
  const otherToken = 'e2e-T0ken_two';
  const p = await bigseg(t, {
    BIGSEG_REDIS_URL: sharedRedisAddress().url,
    BIGSEG_PREFIX: data.prefix,
    BIGSEG_API_TOKENS: `${otherToken},${token}`,
  });
  const logger = captureLogger();
  const client = await sdkClient(t, p.url, token, logger);
  await waitAvailable(client, true);

  const cases = [
    ['alice', undefined, { value: IN, status: 'HEALTHY' }], // included
    ['bob', 'gold', { value: OUT, status: 'HEALTHY' }], // excluded: the segment's rule would match
    ['carol', undefined, { value: OUT, status: 'HEALTHY' }], // unknown to bigseg
    ['dave', 'gold', { value: IN, status: 'HEALTHY' }], // unknown: the segment's own rule applies
    ['erin', undefined, { value: OUT, status: 'HEALTHY' }], // in other segments only
    ['alice', undefined, { value: IN, status: 'HEALTHY' }], // again, from the SDK's cache
  ];
  for (const [key, tier, want] of cases) {
    assert.deepEqual(await evaluate(client, key, tier), want, `${key} (tier ${tier})`);
  }

  await t.test('stale data is STALE', async () => {
    await data.setSynchronizedOn(Date.now() - 3600 * 1000);
    await data.setMembership(hashOf('frank'), [REF]);
    await waitFor('the SDK to see stale data', () => client.bigSegmentStoreStatusProvider.getStatus()?.stale === true);
    assert.deepEqual(await evaluate(client, 'frank'), { value: IN, status: 'STALE' });
  });

  await t.test('a token bigseg does not accept is STORE_ERROR', async (t) => {
    const logger = captureLogger();
    const other = await sdkClient(t, p.url, `not-${token}`, logger);
    assert.deepEqual(await evaluate(other, 'alice'), storeError);
    assert.ok(logger.lines.some((l) => l.startsWith('error:') && l.includes('HTTP 401')), `no HTTP 401 logged: ${logger.lines.join('\n')}`);
    for (const secret of [token, otherToken, `not-${token}`]) {
      assert.ok(!logger.lines.some((l) => l.includes(secret)), 'an SDK log line holds a token');
    }
  });

  assert.ok(
    logger.lines.some((l) => l.startsWith('info:') && l.includes(`Big Segment store: bigseg at ${p.url}`)),
    `the store did not log through the SDK's logger: ${logger.lines.join('\n')}`,
  );
  for (const secret of [token, otherToken]) {
    assert.ok(!logger.lines.some((l) => l.includes(secret)), 'an SDK log line holds a token');
  }
});

test('the SDK status follows bigseg: STORE_ERROR, Redis down, bigseg down, and recovery', { skip }, async (t) => {
  await t.test("bigseg answers STORE_ERROR: its store's data is unreadable", async (t) => {
    const data = layout(t);
    await data.setSynchronizedNow();
    for (const key of ['alice-1', 'alice-2', 'alice-3']) await data.setMembership(hashOf(key), [REF]);
    const p = await bigseg(t, { BIGSEG_REDIS_URL: sharedRedisAddress().url, BIGSEG_PREFIX: data.prefix });
    const client = await sdkClient(t, p.url);
    await waitAvailable(client, true);
    assert.deepEqual(await evaluate(client, 'alice-1'), healthy, 'before');

    // Not a number: bigseg's poller marks its store unavailable; lookups answer 200 STORE_ERROR.
    await redis.command('SET', `${data.prefix}:big_segments_synchronized_on`, 'not-a-number');
    await waitAvailable(client, false);
    assert.deepEqual(await evaluate(client, 'alice-2'), storeError, 'while unreadable');

    await data.setSynchronizedNow();
    await waitAvailable(client, true);
    assert.deepEqual(await evaluate(client, 'alice-3'), healthy, 'after');
  });

  await t.test('bigseg answers 503: Redis stopped and restarted', { skip: !(await haveRedisServer()) && 'redis-server is not installed' }, async (t) => {
    const r = await startRedis();
    t.after(() => r.remove());
    const write = async (...keys) => {
      const c = await RedisClient.connect(r.port);
      try {
        const data = new LDLayout(c, 'launchdarkly');
        await data.setSynchronizedNow();
        for (const key of keys) await data.setMembership(hashOf(key), [REF]);
      } finally {
        c.close();
      }
    };
    await write('alice-1', 'alice-2');
    const p = await bigseg(t, { BIGSEG_REDIS_URL: r.url, BIGSEG_REDIS_DIAL_TIMEOUT: '200ms' });
    const client = await sdkClient(t, p.url);
    await waitAvailable(client, true);
    assert.deepEqual(await evaluate(client, 'alice-1'), healthy, 'before');

    await r.stop();
    await waitAvailable(client, false);
    assert.deepEqual(await evaluate(client, 'alice-2'), storeError, 'while Redis is down');

    await r.start(); // empty: it saves nothing; the synchronizer writes again
    await write('alice-3');
    await waitAvailable(client, true);
    assert.deepEqual(await evaluate(client, 'alice-3'), healthy, 'after');
  });

  await t.test('bigseg down and restarted', async (t) => {
    const data = layout(t);
    await data.setSynchronizedNow();
    for (const key of ['alice-1', 'alice-2', 'alice-3']) await data.setMembership(hashOf(key), [REF]);
    const p = await bigseg(t, { BIGSEG_REDIS_URL: sharedRedisAddress().url, BIGSEG_PREFIX: data.prefix });
    const client = await sdkClient(t, p.url);
    await waitAvailable(client, true);
    assert.deepEqual(await evaluate(client, 'alice-1'), healthy, 'before');

    await p.kill();
    await waitAvailable(client, false);
    assert.deepEqual(await evaluate(client, 'alice-2'), storeError, 'while bigseg is down');

    const again = await p.restart();
    t.after(() => again.stop());
    await waitAvailable(client, true);
    assert.deepEqual(await evaluate(client, 'alice-3'), healthy, 'after');
  });
});
