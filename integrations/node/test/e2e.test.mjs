// End to end: the real @launchdarkly/node-server-sdk, with its file data source and no events,
// reads Big Segments through the adapter from real bigseg processes over real Redis (the flag
// and its Big Segment: sdk.mjs); each test in each deployment (DEPLOYMENTS): unscoped, and
// through one environment of three.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import {
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
import { DEPLOYMENTS, IN, OUT, REF, captureLogger, deploy, evaluate, removeFlagData, sdkClient as sdkClientOf, waitAvailable } from './sdk.mjs';

const redis = await connectSharedRedis();
const skip = redis ? false : `no Redis at ${sharedRedisAddress().url}; set BIGSEG_TEST_REDIS_URL, or BIGSEG_TEST_REQUIRE_REDIS=1 to fail instead`;
let server;

before(async () => {
  if (skip) return;
  server = await serverBinary();
});

after(() => {
  if (redis) redis.close();
  if (server) server.cleanup();
  removeFlagData();
});

/** A real SDK client reading Big Segments through the adapter at baseUrl with bearerToken, as d has it read. */
function sdkClient(t, d, baseUrl, bearerToken, logger) {
  return sdkClientOf(t, { baseUrl, environment: d.environment, bearerToken }, logger);
}

/** A bigseg process for the test, stopped when it ends (its log shown if it failed). */
async function bigseg(t, settings) {
  const p = await startBigseg(server.bin, settings);
  t.after(async () => {
    await p.stop();
  });
  return p;
}

/** The writer of the test's data under a prefix of its own, cleared when it ends, and bigseg's settings serving it as d does. */
function layout(t, d) {
  const served = deploy(d, redis, testPrefix(t.name));
  t.after(() => served.data.clear());
  return served;
}

const healthy = { value: IN, status: 'HEALTHY' };
const storeError = { value: OUT, status: 'STORE_ERROR' };

for (const d of DEPLOYMENTS) {
  test(`the SDK evaluates Big Segment rules through bigseg (${d.name})`, { skip }, async (t) => {
    const { data, settings } = layout(t, d);
    await data.setSynchronizedNow();
    await data.setMembership(hashOf('alice'), [REF]);
    await data.setMembership(hashOf('bob'), [], [REF]);
    await data.setMembership(hashOf('erin'), ['other-segment.g1'], ['another.g2']);
    const token = 'e2e-T0ken_one';
    const otherToken = 'e2e-T0ken_two';
    const p = await bigseg(t, {
      BIGSEG_REDIS_URL: sharedRedisAddress().url,
      ...settings,
      BIGSEG_API_TOKENS: `${otherToken},${token}`,
    });
    const logger = captureLogger();
    const client = await sdkClient(t, d, p.url, token, logger);
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
      const other = await sdkClient(t, d, p.url, `not-${token}`, logger);
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

  test(`the SDK status follows bigseg: STORE_ERROR, Redis down, bigseg down, and recovery (${d.name})`, { skip }, async (t) => {
    await t.test("bigseg answers STORE_ERROR: its store's data is unreadable", async (t) => {
      const { data, settings } = layout(t, d);
      await data.setSynchronizedNow();
      for (const key of ['alice-1', 'alice-2', 'alice-3']) await data.setMembership(hashOf(key), [REF]);
      const p = await bigseg(t, { BIGSEG_REDIS_URL: sharedRedisAddress().url, ...settings });
      const client = await sdkClient(t, d, p.url);
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
          const { data } = deploy(d, c, 'launchdarkly');
          await data.setSynchronizedNow();
          for (const key of keys) await data.setMembership(hashOf(key), [REF]);
        } finally {
          c.close();
        }
      };
      await write('alice-1', 'alice-2');
      const { settings } = deploy(d, undefined, 'launchdarkly');
      const p = await bigseg(t, { BIGSEG_REDIS_URL: `${r.url}?dial_timeout=200ms`, ...settings });
      const client = await sdkClient(t, d, p.url);
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
      const { data, settings } = layout(t, d);
      await data.setSynchronizedNow();
      for (const key of ['alice-1', 'alice-2', 'alice-3']) await data.setMembership(hashOf(key), [REF]);
      const p = await bigseg(t, { BIGSEG_REDIS_URL: sharedRedisAddress().url, ...settings });
      const client = await sdkClient(t, d, p.url);
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
}
