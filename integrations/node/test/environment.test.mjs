// The environment option against an in-process server: the routes it asks, bigseg's answers
// that concern environments (see handlers/environments.go and internal/auth/auth.go) mapped
// to errors that say what to change, the option's checks and the factory's log line.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { BigsegBigSegmentStore, BigsegError } from '@bigseg/node-server-sdk-bigseg';

import { answer, fakeBigseg } from './fake.mjs';

const TOKEN = 's3cr3t-T0ken.for~tests';
// The hash of "dave": it has each character a query string must escape ('+', '/', '=').
const HASH = 'YeoIA/iFNSO3d9QUrOMTDNTT+S3izX/4aVwzfXnC7u4=';
const json = 'application/json';

function store(t, options) {
  const s = BigsegBigSegmentStore(options)();
  t.after(() => s.close());
  return s;
}

/** Asserts that promise rejects with a BigsegError as want describes, without the token. */
async function assertRejects(promise, want) {
  const err = await promise.then(
    () => assert.fail('resolved; want a rejection'),
    (e) => e,
  );
  assert.ok(err instanceof BigsegError, `not a BigsegError: ${err}`);
  assert.equal(err.kind, want.kind, err.message);
  assert.equal(err.status, want.status, err.message);
  assert.ok(err.message.includes(want.contains), `"${err.message}" does not say "${want.contains}"`);
  assert.ok(!err.message.includes(TOKEN), `the error holds the bearer token: ${err}`);
}

test('environment: the routes under /environments/{name}/, below the base URL path', async (t) => {
  const cases = [
    ['staging', '/behind/proxy/environments/staging'],
    [' eu-west_1\n', '/behind/proxy/environments/eu-west_1'],
    ['default', '/behind/proxy/environments/default'],
    ['', '/behind/proxy'],
    [undefined, '/behind/proxy'],
    [null, '/behind/proxy'],
  ];
  for (const [environment, routes] of cases) {
    await t.test(JSON.stringify(environment) ?? 'undefined', async (t) => {
      const f = await fakeBigseg(t, (req, res) => {
        if (req.url.endsWith('/status')) answer(200, json, '{"available":true,"lastSynchronizedOn":1}')(req, res);
        else answer(200, json, '{"memberships":{},"status":"HEALTHY"}')(req, res);
      });
      const s = store(t, { baseUrl: `${f.url}/behind/proxy/`, environment, bearerToken: TOKEN });
      assert.equal(await s.getUserMembership(HASH), undefined);
      assert.deepEqual(await s.getMetadata(), { lastUpToDate: 1 });
      assert.deepEqual(
        f.requests.map((r) => [r.method, r.url, r.headers.authorization]),
        [
          ['GET', `${routes}/memberships?contextHash=YeoIA%2FiFNSO3d9QUrOMTDNTT%2BS3izX%2F4aVwzfXnC7u4%3D`, `Bearer ${TOKEN}`],
          ['GET', `${routes}/status`, `Bearer ${TOKEN}`],
        ],
      );
    });
  }
});

test("environment: bigseg's answers about environments", async (t) => {
  const served = 'production, staging, qa';
  const cases = [
    {
      name: '404: an environment not served',
      environment: 'prod',
      handler: answer(404, json, `{"error":"no environment prod: the environments served are ${served}"}`),
      membership: {
        kind: 'HTTP',
        status: 404,
        contains: `HTTP 404 (bigseg does not serve environment "prod", or the base URL is not bigseg's): no environment prod: the environments served are ${served}`,
      },
      status: { kind: 'HTTP', status: 404, contains: 'bigseg does not serve environment "prod"' },
    },
    {
      name: '403: the token does not open the environment',
      environment: 'production',
      handler: answer(403, json, '{"error":"this token does not open environment production"}'),
      membership: {
        kind: 'HTTP',
        status: 403,
        contains: 'HTTP 403 (the bearer token does not open environment "production"): this token does not open environment production',
      },
      status: { kind: 'HTTP', status: 403, contains: 'the bearer token does not open environment "production"' },
    },
    {
      name: '404 unscoped: several environments served',
      handler: answer(404, json, `{"error":"several environments are served (${served}): ask under /environments/{env}/, such as /environments/production/memberships"}`),
      membership: {
        kind: 'HTTP',
        status: 404,
        contains: `HTTP 404 (no such route: is the base URL bigseg's? One serving several environments needs the environment option set): several environments are served (${served})`,
      },
      status: { kind: 'HTTP', status: 404, contains: 'needs the environment option set' },
    },
    {
      name: '403 unscoped: a scoped token',
      handler: answer(403, json, '{"error":"this token does not open every environment: ask for one, under /environments/{env}/"}'),
      membership: {
        kind: 'HTTP',
        status: 403,
        contains:
          'HTTP 403 (forbidden: a bearer token scoped to some environments needs the environment option set to one of them): this token does not open every environment',
      },
      status: { kind: 'HTTP', status: 403, contains: 'needs the environment option set' },
    },
    {
      name: 'unscoped /status of several environments',
      handler: answer(
        200,
        json,
        '{"environments":{"staging":{"available":true,"lastSynchronizedOn":1,"environment":"staging"},"production":{"available":true,"lastSynchronizedOn":2,"environment":"production"}}}',
      ),
      status: {
        kind: 'BAD_RESPONSE',
        status: 200,
        contains: "bigseg status: bigseg serves several environments (production, staging): set the store's environment option to one of them",
      },
    },
    {
      name: 'a status of another environment',
      environment: 'staging',
      handler: answer(200, json, '{"available":true,"lastSynchronizedOn":1,"environment":"production"}'),
      status: { kind: 'BAD_RESPONSE', status: 200, contains: 'the answer is for environment "production", not "staging"' },
    },
    {
      name: 'a status naming its environment',
      environment: 'staging',
      handler: answer(200, json, '{"available":true,"lastSynchronizedOn":1,"environment":"staging"}'),
    },
  ];
  for (const c of cases) {
    await t.test(c.name, async (t) => {
      const f = await fakeBigseg(t, c.handler);
      const s = store(t, { baseUrl: f.url, environment: c.environment, bearerToken: TOKEN });
      if (c.membership) await assertRejects(s.getUserMembership(HASH), c.membership);
      if (c.status) await assertRejects(s.getMetadata(), c.status);
      else assert.deepEqual(await s.getMetadata(), { lastUpToDate: 1 });
    });
  }
});

test('environment: checked at configuration', () => {
  const cases = [
    ['Production', '"Production" is not an environment name'],
    ['prod/../status', '"prod/../status" is not an environment name'],
    ['prod staging', 'not an environment name'],
    ['.', 'not an environment name'],
    ['prod%2F', 'not an environment name'],
    ['-prod', 'not an environment name'],
    ['prüf', 'not an environment name'],
    ['e'.repeat(64), 'at most 63 characters'],
    [5, 'bigseg environment: must be a string'],
    [['staging'], 'bigseg environment: must be a string'],
  ];
  for (const [environment, want] of cases) {
    assert.throws(
      () => BigsegBigSegmentStore({ environment }),
      (err) => err instanceof TypeError && err.message.includes(want),
      JSON.stringify(environment),
    );
  }
  for (const environment of ['production', 'default', 'qa', 'eu-west_1', '0', 'e'.repeat(63)]) {
    assert.doesNotThrow(() => BigsegBigSegmentStore({ environment })().close(), environment);
  }
});

test('environment: the factory logs it with the base URL', () => {
  for (const [environment, want] of [
    ['staging', 'info: Big Segment store: bigseg at http://bigseg:8080, environment staging'],
    [undefined, 'info: Big Segment store: bigseg at http://bigseg:8080'],
  ]) {
    const lines = [];
    const logger = { error() {}, warn() {}, info: (m) => lines.push(`info: ${m}`), debug() {} };
    BigsegBigSegmentStore({ baseUrl: 'http://bigseg:8080', environment })({ basicConfiguration: { logger } }).close();
    assert.deepEqual(lines, [want]);
  }
});
