// LaunchDarkly's Big Segment store cases for Node (those its own Redis store is tested with,
// js-core's RedisBigSegmentStore tests, as Go's storetest suite has them), against the adapter
// talking to a real bigseg over the shared Redis with its cache off: once unscoped
// (BIGSEG_PREFIX), and once through one environment of a bigseg serving three
// (BIGSEG_ENVIRONMENTS, the environment option and a bearer token), whose other environments
// hold other data for the same context hash and another synchronization time, which a store
// reading another environment would return. And once against a bigseg reading a DynamoDB
// table (moto_server) in LaunchDarkly's DynamoDB layout with no prefix, written as the Relay
// Proxy writes it.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { BigsegBigSegmentStore } from '@bigseg/node-server-sdk-bigseg';

import { LDLayout, connectSharedRedis, serverBinary, sharedRedisAddress, startBigseg, testPrefix } from './support.mjs';
import { LDDynamoLayout, createTable, dropTable, motoUnavailable, startMoto, tempDir } from './dynamodb.mjs';

const FAKE_HASH = 'userhash';

const redis = await connectSharedRedis();
const skip = redis ? false : `no Redis at ${sharedRedisAddress().url}; set BIGSEG_TEST_REDIS_URL, or BIGSEG_TEST_REQUIRE_REDIS=1 to fail instead`;
const skipDynamo = await motoUnavailable();
let server;

before(async () => {
  if (skip && skipDynamo) return;
  server = await serverBinary();
});

after(() => {
  if (redis) redis.close();
  if (server) server.cleanup();
});

/**
 * Runs the cases with setup(t), which starts a bigseg and returns { layout, options, reported }:
 * the layout the cases write, the store's options, and reported(ms), which resolves once
 * bigseg's status (its last poll, every 50 ms) says that synchronization time.
 */
async function suite(t, setup) {
  const { layout, options, reported } = await setup(t);
  const withStoreAndEmptyData = (action) => async (t) => {
    await layout.clear();
    await reported(0);
    const store = BigsegBigSegmentStore(options)();
    t.after(() => store.close());
    await action(store);
  };
  const setMetadata = async (ms) => {
    await layout.setSynchronizedOn(ms);
    await reported(ms);
  };

  await t.test(
    'can get populated meta data',
    withStoreAndEmptyData(async (store) => {
      await setMetadata(1234567890);
      assert.deepEqual(await store.getMetadata(), { lastUpToDate: 1234567890 });
    }),
  );
  await t.test(
    'can get metadata when not populated',
    withStoreAndEmptyData(async (store) => {
      assert.equal((await store.getMetadata())?.lastUpToDate, undefined);
    }),
  );
  await t.test(
    'can get user membership for a user which has no membership',
    withStoreAndEmptyData(async (store) => {
      assert.equal(await store.getUserMembership(FAKE_HASH), undefined);
    }),
  );
  await t.test(
    'can get membership for a user that is only included',
    withStoreAndEmptyData(async (store) => {
      await layout.setMembership(FAKE_HASH, ['key1', 'key2'], []); // bigseg's cache is off
      assert.deepEqual(await store.getUserMembership(FAKE_HASH), { key1: true, key2: true });
    }),
  );
  await t.test(
    'can get membership for a user that is only excluded',
    withStoreAndEmptyData(async (store) => {
      await layout.setMembership(FAKE_HASH, [], ['key1', 'key2']);
      assert.deepEqual(await store.getUserMembership(FAKE_HASH), { key1: false, key2: false });
    }),
  );
  await t.test(
    'can get membership for a user that is included and excluded',
    withStoreAndEmptyData(async (store) => {
      await layout.setMembership(FAKE_HASH, ['key1', 'key2'], ['key2', 'key3']);
      // key2 is included and excluded: included wins
      assert.deepEqual(await store.getUserMembership(FAKE_HASH), { key1: true, key2: true, key3: false });
    }),
  );
}

/** A bigseg for the test, stopped when it ends. */
async function bigseg(t, settings) {
  const p = await startBigseg(server.bin, { BIGSEG_REDIS_URL: sharedRedisAddress().url, BIGSEG_CACHE_SIZE: '0', ...settings });
  t.after(() => p.stop());
  return p;
}

/** A layout under a prefix of the test's own, cleared when it ends. */
function layoutFor(t, name) {
  const l = new LDLayout(redis, testPrefix(name));
  t.after(() => l.clear());
  return l;
}

test('the Big Segment store cases, unscoped (BIGSEG_PREFIX)', { skip }, async (t) => {
  await suite(t, async (t) => {
    const layout = layoutFor(t, 'storesuite');
    const p = await bigseg(t, { BIGSEG_PREFIX: layout.prefix });
    return {
      layout,
      options: { baseUrl: p.url },
      reported: (ms) => p.waitStatus(`lastSynchronizedOn ${ms}`, (st) => st.available && st.lastSynchronizedOn === ms),
    };
  });
});

test('the Big Segment store cases, through the environment staging of three', { skip }, async (t) => {
  await suite(t, async (t) => {
    const layouts = {};
    for (const name of ['production', 'staging', 'qa']) layouts[name] = layoutFor(t, `storesuite_${name}`);
    for (const other of ['production', 'qa']) {
      await layouts[other].setSynchronizedOn(999);
      await layouts[other].setMembership(FAKE_HASH, ['other-environment.g1'], ['key1', 'key2']);
    }
    const token = 'suite-T0ken';
    const p = await bigseg(t, {
      BIGSEG_ENVIRONMENTS: Object.entries(layouts)
        .map(([name, l]) => `${name}=${l.prefix}`)
        .join(','),
      BIGSEG_API_TOKENS: token,
    });
    return {
      layout: layouts.staging,
      options: { baseUrl: p.url, environment: 'staging', bearerToken: token },
      reported: (ms) => p.waitStatus(`lastSynchronizedOn ${ms}`, (st) => st.available && st.lastSynchronizedOn === ms, 'staging'),
    };
  });
});

test('the Big Segment store cases, on DynamoDB (no prefix)', { skip: skipDynamo }, async (t) => {
  const moto = await startMoto();
  const client = moto.client();
  try {
    await suite(t, async (t) => {
      const table = await createTable(client, 'storesuite');
      const aws = tempDir();
      const p = await startBigseg(server.bin, { ...moto.bigsegSettings(table, aws.dir), BIGSEG_CACHE_SIZE: '0' });
      t.after(async () => {
        await p.stop();
        await dropTable(client, table);
        aws.remove();
      });
      return {
        layout: new LDDynamoLayout(client, table),
        options: { baseUrl: p.url },
        reported: (ms) => p.waitStatus(`lastSynchronizedOn ${ms}`, (st) => st.available && st.lastSynchronizedOn === ms),
      };
    });
  } finally {
    // Registered last, so run after the hooks above: moto outlives the bigseg reading it.
    t.after(async () => {
      client.destroy();
      await moto.stop();
    });
  }
});
