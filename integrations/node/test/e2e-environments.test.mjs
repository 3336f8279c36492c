// End to end with several environments: one real bigseg serving three (BIGSEG_ENVIRONMENTS) from
// the shared Redis, a prefix of the test's own each, and the real @launchdarkly/node-server-sdk
// reading each through the adapter's environment option; a token scoped to staging
// (BIGSEG_API_TOKENS_FILE) refused on production.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { BigsegBigSegmentStore, BigsegError } from '@bigseg/node-server-sdk-bigseg';

import { LDLayout, connectSharedRedis, hashOf, serverBinary, sharedRedisAddress, startBigseg, testPrefix } from './support.mjs';
import { IN, OUT, REF, captureLogger, evaluate, removeFlagData, sdkClient, waitStatus } from './sdk.mjs';

const redis = await connectSharedRedis();
const skip = redis ? false : `no Redis at ${sharedRedisAddress().url}; set BIGSEG_TEST_REDIS_URL, or BIGSEG_TEST_REQUIRE_REDIS=1 to fail instead`;
let server;
let tmp;

before(async () => {
  if (skip) return;
  server = await serverBinary();
  tmp = mkdtempSync(path.join(tmpdir(), 'bigseg-node-envs-'));
});

after(() => {
  if (redis) redis.close();
  if (server) server.cleanup();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
  removeFlagData();
});

const NAMES = ['production', 'staging', 'qa'];

/**
 * A layout writer per environment, under a prefix of the test's own each (cleared when it
 * ends), and the BIGSEG_ENVIRONMENTS that serves them.
 */
function environmentLayouts(t) {
  const layouts = {};
  for (const name of NAMES) {
    layouts[name] = new LDLayout(redis, testPrefix(`${t.name}_${name}`));
    t.after(() => layouts[name].clear());
  }
  return { layouts, BIGSEG_ENVIRONMENTS: NAMES.map((n) => `${n}=${layouts[n].prefix}`).join(',') };
}

async function bigseg(t, settings) {
  const p = await startBigseg(server.bin, settings);
  t.after(() => p.stop());
  return p;
}

const healthy = { available: true, stale: false };
const unavailable = { available: false, stale: false };
const storeError = { value: OUT, status: 'STORE_ERROR' };

test('the SDK evaluates through each environment, each with its own data', { skip }, async (t) => {
  const { layouts, BIGSEG_ENVIRONMENTS } = environmentLayouts(t);
  const data = {
    production: { syncedAgo: 0, included: ['alice'], excluded: ['bob'] },
    staging: { syncedAgo: 0, included: ['bob', 'carol'], excluded: ['alice'] },
    qa: { syncedAgo: 3600 * 1000, included: ['dave'], excluded: ['carol'] }, // stale
  };
  for (const [env, d] of Object.entries(data)) {
    await layouts[env].setSynchronizedOn(Date.now() - d.syncedAgo);
    for (const key of d.included) await layouts[env].setMembership(hashOf(key), [REF]);
    for (const key of d.excluded) await layouts[env].setMembership(hashOf(key), [], [REF]);
  }
  const token = 'e2e-envs-T0ken';
  const p = await bigseg(t, { BIGSEG_REDIS_URL: sharedRedisAddress().url, BIGSEG_ENVIRONMENTS, BIGSEG_API_TOKENS: token });

  // The same contexts in each environment; tier gold makes the segment's own rule match a
  // context the Big Segment data does not name, so that "excluded" and "unknown" differ.
  const contexts = [
    ['alice', undefined],
    ['bob', 'gold'],
    ['carol', 'gold'],
    ['dave', undefined],
  ];
  const cases = [
    // alice included, bob excluded, carol and dave unknown
    { env: 'production', status: healthy, values: [IN, OUT, IN, OUT], reason: 'HEALTHY' },
    // alice excluded, bob and carol included, dave unknown
    { env: 'staging', status: healthy, values: [OUT, IN, IN, OUT], reason: 'HEALTHY' },
    // alice and bob unknown, carol excluded, dave included; synchronized an hour ago
    { env: 'qa', status: { available: true, stale: true }, values: [OUT, IN, OUT, IN], reason: 'STALE' },
  ];
  const clients = {};
  const loggers = {};
  for (const c of cases) {
    // all three open at once, in one process
    loggers[c.env] = captureLogger();
    clients[c.env] = await sdkClient(t, { baseUrl: p.url, environment: c.env, bearerToken: token }, loggers[c.env]);
  }
  for (const c of cases) {
    await t.test(c.env, async () => {
      await waitStatus(clients[c.env], c.status);
      const got = [];
      for (const [key, tier] of contexts) got.push(await evaluate(clients[c.env], key, tier));
      assert.deepEqual(
        got,
        c.values.map((value) => ({ value, status: c.reason })),
      );
      const lines = loggers[c.env].lines;
      assert.ok(lines.includes(`info: Big Segment store: bigseg at ${p.url}, environment ${c.env}`), lines.join('\n'));
      assert.ok(!lines.some((l) => l.includes(token)), 'an SDK log line holds the token');
    });
  }

  await t.test('an environment bigseg does not serve is STORE_ERROR, saying so', async (t) => {
    const logger = captureLogger();
    const client = await sdkClient(t, { baseUrl: p.url, environment: 'preview', bearerToken: token }, logger);
    await waitStatus(client, unavailable);
    assert.deepEqual(await evaluate(client, 'alice'), storeError);
    for (const want of [
      `bigseg membership: HTTP 404 (bigseg does not serve environment "preview", or the base URL is not bigseg's): no environment preview: the environments served are production, staging, qa`,
      'bigseg status: HTTP 404 (bigseg does not serve environment "preview"',
    ]) {
      assert.ok(logger.lines.some((l) => l.startsWith('error:') && l.includes(want)), `no error logged with "${want}":\n${logger.lines.join('\n')}`);
    }
  });

  await t.test('without the environment option, a bigseg of several environments is STORE_ERROR, saying so', async (t) => {
    const logger = captureLogger();
    const client = await sdkClient(t, { baseUrl: p.url, bearerToken: token }, logger);
    await waitStatus(client, unavailable);
    assert.deepEqual(await evaluate(client, 'alice'), storeError);
    for (const want of [
      "bigseg membership: HTTP 404 (no such route: is the base URL bigseg's? One serving several environments needs the environment option set): several environments are served (production, staging, qa)",
      "bigseg status: bigseg serves several environments (production, qa, staging): set the store's environment option to one of them",
    ]) {
      assert.ok(logger.lines.some((l) => l.startsWith('error:') && l.includes(want)), `no error logged with "${want}":\n${logger.lines.join('\n')}`);
    }
  });
});

test('a token scoped to staging reads staging and is refused on production', { skip }, async (t) => {
  const { layouts, BIGSEG_ENVIRONMENTS } = environmentLayouts(t);
  for (const env of NAMES) {
    await layouts[env].setSynchronizedNow();
    await layouts[env].setMembership(hashOf('alice'), [REF]);
  }
  const allToken = 'tok-all';
  const stagingToken = 'tok-staging';
  const tokens = path.join(tmp, `tokens-${testPrefix(t.name)}`);
  writeFileSync(tokens, `# token  environments\n${allToken}\n${stagingToken} staging\n`, { mode: 0o600 });
  const p = await bigseg(t, { BIGSEG_REDIS_URL: sharedRedisAddress().url, BIGSEG_ENVIRONMENTS, BIGSEG_API_TOKENS_FILE: tokens });

  await t.test('store', async (t) => {
    const cases = [
      { environment: 'staging', token: stagingToken },
      { environment: 'production', token: allToken },
      {
        environment: 'production',
        token: stagingToken,
        membership: { status: 403, contains: 'HTTP 403 (the bearer token does not open environment "production"): this token does not open environment production' },
      },
      { environment: 'qa', token: stagingToken, membership: { status: 403, contains: 'this token does not open environment qa' } },
      {
        environment: 'preview',
        token: allToken,
        membership: { status: 404, contains: `HTTP 404 (bigseg does not serve environment "preview", or the base URL is not bigseg's): no environment preview` },
        status: { kind: 'HTTP', status: 404, contains: 'the environments served are production, staging, qa' },
      },
      // The token check comes first: a token of staging learns nothing of other names.
      {
        environment: 'preview',
        token: stagingToken,
        membership: { status: 403, contains: 'this token does not open environment preview' },
        status: { kind: 'HTTP', status: 404, contains: 'no environment preview' },
      },
      {
        environment: undefined,
        token: stagingToken,
        membership: { status: 403, contains: 'this token does not open every environment' },
        status: { kind: 'BAD_RESPONSE', status: 200, contains: 'bigseg serves several environments (production, qa, staging)' },
      },
    ];
    for (const c of cases) {
      await t.test(`${c.environment ?? '(none)'} ${c.token}`, async (t) => {
        const s = BigsegBigSegmentStore({ baseUrl: p.url, environment: c.environment, bearerToken: c.token })();
        t.after(() => s.close());
        const membership = s.getUserMembership(hashOf('alice'));
        if (c.membership) await assertRejects(membership, { kind: 'HTTP', ...c.membership });
        else assert.deepEqual(await membership, { [REF]: true });
        const metadata = s.getMetadata();
        if (c.status) await assertRejects(metadata, c.status);
        else assert.ok((await metadata).lastUpToDate > 0);
      });
    }
  });

  await t.test('SDK', async (t) => {
    const cases = [
      { environment: 'staging', token: stagingToken, want: { value: IN, status: 'HEALTHY' } },
      { environment: 'production', token: allToken, want: { value: IN, status: 'HEALTHY' } },
      { environment: 'production', token: stagingToken, want: storeError },
    ];
    for (const c of cases) {
      await t.test(`${c.environment} ${c.token}`, async (t) => {
        const logger = captureLogger();
        const client = await sdkClient(t, { baseUrl: p.url, environment: c.environment, bearerToken: c.token }, logger);
        await waitStatus(client, healthy); // /status is open: no token is asked for it
        assert.deepEqual(await evaluate(client, 'alice'), c.want);
        const refused = logger.lines.some((l) => l.startsWith('error:') && l.includes('HTTP 403 (the bearer token does not open environment "production")'));
        assert.equal(refused, c.want === storeError, `the 403 logged: ${refused}\n${logger.lines.join('\n')}`);
        assert.ok(!logger.lines.some((l) => l.includes(allToken) || l.includes(stagingToken)), 'an SDK log line holds a token');
      });
    }
  });
});

/** Asserts that promise rejects with a BigsegError as want describes. */
async function assertRejects(promise, want) {
  const err = await promise.then(
    () => assert.fail('resolved; want a rejection'),
    (e) => e,
  );
  assert.ok(err instanceof BigsegError, `not a BigsegError: ${err}`);
  assert.equal(err.kind, want.kind, err.message);
  assert.equal(err.status, want.status, err.message);
  assert.ok(err.message.includes(want.contains), `"${err.message}" does not say "${want.contains}"`);
}
