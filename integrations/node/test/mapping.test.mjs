// The mapping of every answer bigseg (or something in its place) can give to what the SDK gets
// from the store, against an in-process HTTP server; and the store's requests, token hygiene,
// bounds, keep-alive and close().

import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';

import { BigsegBigSegmentStore, BigsegError } from '@bigseg/node-server-sdk-bigseg';

import { answer, fakeBigseg } from './fake.mjs';

const TOKEN = 's3cr3t-T0ken.for~tests';
// The hash of "dave": it has each character a query string must escape ('+', '/', '=').
const HASH = 'YeoIA/iFNSO3d9QUrOMTDNTT+S3izX/4aVwzfXnC7u4=';

function store(t, options, logger) {
  const s = BigsegBigSegmentStore(options)({ basicConfiguration: { logger } });
  t.after(() => s.close());
  return s;
}

/** Asserts that promise rejects with a BigsegError as want describes, without the token. */
async function assertRejects(promise, want) {
  let err;
  try {
    await promise;
  } catch (e) {
    err = e;
  }
  assert.ok(err, 'resolved; want a rejection');
  assert.ok(err instanceof BigsegError, `not a BigsegError: ${err}`);
  assert.equal(err.kind, want.kind, err.message);
  assert.equal(err.status, want.status, err.message);
  if (want.retryAfter !== undefined) assert.equal(err.retryAfter, want.retryAfter);
  if (want.contains) assert.ok(err.message.includes(want.contains), `"${err.message}" does not say "${want.contains}"`);
  assert.ok(!String(err).includes(TOKEN), `the error holds the bearer token: ${err}`);
  return err;
}

const json = 'application/json';
// The most of a response the store reads with the default bounds: 6 × 65536 (every ref byte
// escaped) + 9 × 1000 (each ref's punctuation) + 4096.
const MAX_BODY = 406312;
const huge = 'x'.repeat(MAX_BODY + 1);

const membershipCases = [
  {
    name: '200 HEALTHY with memberships',
    handler: answer(200, json, `{"contextHash":"${HASH}","memberships":{"beta.g3":true,"blocked.g1":false},"status":"HEALTHY"}`),
    want: { 'beta.g3': true, 'blocked.g1': false },
  },
  {
    name: '200 STALE is a good answer',
    handler: answer(200, json, `{"contextHash":"${HASH}","memberships":{"beta.g3":true},"status":"STALE"}`),
    want: { 'beta.g3': true },
  },
  {
    name: '200 with no membership is undefined',
    handler: answer(200, json, `{"contextHash":"${HASH}","memberships":{},"status":"HEALTHY"}`),
    want: undefined,
  },
  {
    name: '200 without contextHash, with fields added later (lenient)',
    handler: answer(200, json, '{"memberships":{"blocked.g1":false},"status":"HEALTHY","cursor":"x"}'),
    want: { 'blocked.g1': false },
  },
  {
    name: '200 STORE_ERROR: bigseg marks its store unavailable',
    handler: answer(200, json, `{"contextHash":"${HASH}","memberships":{"beta.g3":true},"status":"STORE_ERROR"}`),
    err: { kind: 'STORE_UNAVAILABLE', status: 200, contains: 'STORE_ERROR' },
  },
  {
    name: '503 STORE_ERROR: the read failed',
    handler: answer(503, json, `{"contextHash":"${HASH}","status":"STORE_ERROR","error":"read membership: connection refused"}`),
    err: { kind: 'STORE_UNAVAILABLE', status: 503, contains: 'connection refused' },
  },
  {
    name: '503 from a proxy',
    handler: answer(503, 'text/plain', 'no healthy upstream\nmore'),
    err: { kind: 'HTTP', status: 503, contains: 'no healthy upstream' },
  },
  {
    name: '401',
    handler: answer(401, json, '{"error":"a valid bearer token is required"}', { 'www-authenticate': 'Bearer' }),
    err: { kind: 'HTTP', status: 401, contains: 'a valid bearer token is required' },
  },
  {
    name: '429 with Retry-After',
    handler: answer(429, json, '{"error":"rate limited"}', { 'retry-after': '1' }),
    err: { kind: 'HTTP', status: 429, retryAfter: '1', contains: 'rate limit in front of bigseg' },
  },
  {
    name: '400',
    handler: answer(400, json, '{"error":"context hash is not valid padded standard base64"}'),
    err: { kind: 'HTTP', status: 400, contains: 'not valid padded standard base64' },
  },
  {
    name: '404',
    handler: answer(404, json, '{"error":"no such route"}'),
    err: { kind: 'HTTP', status: 404, contains: "is the base URL bigseg's?" },
  },
  {
    name: '500 with an HTML body',
    handler: answer(500, 'text/html', '<html>Internal Server Error</html>\n<body>'),
    err: { kind: 'HTTP', status: 500, contains: '<html>Internal Server Error</html>' },
  },
  {
    name: 'redirects are not followed',
    handler: answer(302, '', '', { location: 'http://elsewhere.invalid/memberships' }),
    err: { kind: 'HTTP', status: 302, contains: 'does not follow' },
  },
  {
    name: '200 that is not JSON',
    handler: answer(200, 'text/html', '<html>captive portal</html>'),
    err: { kind: 'BAD_RESPONSE', status: 200, contains: `not bigseg's (Content-Type "text/html"` },
  },
  {
    name: '200 with truncated JSON',
    handler: answer(200, json, `{"contextHash":"${HASH}","memberships":{"beta.g3":tr`),
    err: { kind: 'BAD_RESPONSE', status: 200, contains: "not bigseg's" },
  },
  {
    name: '200 with memberships of another shape',
    handler: answer(200, json, '{"memberships":["beta.g3"],"status":"HEALTHY"}'),
    err: { kind: 'BAD_RESPONSE', status: 200, contains: 'no memberships' },
  },
  {
    name: '200 with a membership that is not a boolean',
    handler: answer(200, json, '{"memberships":{"beta.g3":"yes"},"status":"HEALTHY"}'),
    err: { kind: 'BAD_RESPONSE', status: 200, contains: 'not true or false' },
  },
  {
    name: '200 without memberships',
    handler: answer(200, json, `{"contextHash":"${HASH}","status":"HEALTHY"}`),
    err: { kind: 'BAD_RESPONSE', status: 200, contains: 'no memberships' },
  },
  {
    name: '200 with an unknown status',
    handler: answer(200, json, '{"memberships":{},"status":"MAYBE"}'),
    err: { kind: 'BAD_RESPONSE', status: 200, contains: 'unknown status "MAYBE"' },
  },
  {
    name: '200 for another context',
    handler: answer(200, json, '{"contextHash":"K9gGyX8OAK8aH8Myj6djqSaXI8jbj6xPk69x2xhtbpA=","memberships":{},"status":"HEALTHY"}'),
    err: { kind: 'BAD_RESPONSE', status: 200, contains: 'another context hash' },
  },
  {
    name: 'body over the bound, with Content-Length',
    handler: answer(200, json, huge, { 'content-length': String(huge.length) }),
    err: { kind: 'TOO_LARGE', status: 200, contains: `${MAX_BODY + 1} bytes, more than the ${MAX_BODY} bytes this store reads` },
  },
  {
    name: 'endless body, chunked',
    handler: (req, res) => {
      res.writeHead(200, { 'content-type': json });
      res.write('{"memberships":{},"pad":"'); // endless
      const chunk = 'a'.repeat(32 * 1024);
      const pump = () => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once('drain', pump);
      };
      res.on('close', () => res.removeAllListeners('drain'));
      pump();
    },
    err: { kind: 'TOO_LARGE', status: 200, contains: `more than the ${MAX_BODY} bytes this store reads` },
  },
];

for (const c of membershipCases) {
  test(`getUserMembership: ${c.name}`, async (t) => {
    const f = await fakeBigseg(t, c.handler);
    const s = store(t, { baseUrl: f.url, bearerToken: TOKEN });
    if (c.err) {
      await assertRejects(s.getUserMembership(HASH), c.err);
    } else {
      assert.deepEqual(await s.getUserMembership(HASH), c.want);
    }
  });
}

const statusCases = [
  {
    name: 'available and synchronized',
    handler: answer(200, json, '{"available":true,"stale":false,"lastSynchronizedOn":1795980183233,"lastSynchronizedAt":"2026-11-30T10:03:03.233Z","checkedAt":"2026-11-30T10:03:04Z","staleAfterSeconds":120,"store":"redis"}'),
    want: { lastUpToDate: 1795980183233 },
  },
  {
    name: 'never synchronized: no lastUpToDate, not an error',
    handler: answer(200, json, '{"available":true,"stale":true,"lastSynchronizedOn":0,"lastSynchronizedAt":null,"checkedAt":"2026-11-30T10:03:04Z"}'),
    want: {},
  },
  {
    name: 'stale is the SDK to judge',
    handler: answer(200, json, '{"available":true,"stale":true,"lastSynchronizedOn":1234567890,"checkedAt":"2026-11-30T10:03:04Z"}'),
    want: { lastUpToDate: 1234567890 },
  },
  {
    name: 'fields added later are ignored',
    handler: answer(200, json, '{"available":true,"lastSynchronizedOn":1795980183233,"syncCursor":"abc","dataChangedOn":1795980183000,"nested":{"x":[1]},"checkedAt":"2026-11-30T10:03:04Z"}'),
    want: { lastUpToDate: 1795980183233 },
  },
  {
    name: 'unavailable',
    handler: answer(200, json, '{"available":false,"lastSynchronizedOn":1795980183233,"checkedAt":"2026-11-30T10:03:04Z"}'),
    err: { kind: 'STORE_UNAVAILABLE', status: 200, contains: 'last status poll' },
  },
  {
    name: 'not polled yet',
    handler: answer(200, json, '{"available":false,"lastSynchronizedOn":0,"lastSynchronizedAt":null,"checkedAt":null}'),
    err: { kind: 'STORE_UNAVAILABLE', status: 200, contains: 'not polled it yet' },
  },
  { name: 'no available', handler: answer(200, json, '{"lastSynchronizedOn":1}'), err: { kind: 'BAD_RESPONSE', status: 200, contains: 'no "available"' } },
  { name: 'no lastSynchronizedOn', handler: answer(200, json, '{"available":true}'), err: { kind: 'BAD_RESPONSE', status: 200, contains: 'lastSynchronizedOn' } },
  { name: 'negative lastSynchronizedOn', handler: answer(200, json, '{"available":true,"lastSynchronizedOn":-5}'), err: { kind: 'BAD_RESPONSE', status: 200, contains: 'lastSynchronizedOn' } },
  { name: 'lastSynchronizedOn of the wrong type', handler: answer(200, json, '{"available":true,"lastSynchronizedOn":"yesterday"}'), err: { kind: 'BAD_RESPONSE', status: 200 } },
  { name: 'not JSON', handler: answer(200, 'text/plain', 'OK'), err: { kind: 'BAD_RESPONSE', status: 200, contains: "not bigseg's" } },
  { name: 'JSON null', handler: answer(200, json, 'null'), err: { kind: 'BAD_RESPONSE', status: 200, contains: 'no "available"' } },
  { name: '401 from a proxy', handler: answer(401, json, '{"error":"unauthorized"}'), err: { kind: 'HTTP', status: 401, contains: 'unauthorized' } },
  { name: '502 from a proxy', handler: answer(502, 'text/html', '<h1>Bad Gateway</h1>'), err: { kind: 'HTTP', status: 502, contains: 'Bad Gateway' } },
  {
    name: 'body over the bound',
    handler: answer(200, json, `{"available":true,"lastSynchronizedOn":1,"pad":"${'x'.repeat(MAX_BODY)}"}`),
    err: { kind: 'TOO_LARGE', status: 200, contains: `more than the ${MAX_BODY} bytes` },
  },
];

for (const c of statusCases) {
  test(`getMetadata: ${c.name}`, async (t) => {
    const f = await fakeBigseg(t, c.handler);
    const s = store(t, { baseUrl: f.url, bearerToken: TOKEN });
    if (c.err) {
      await assertRejects(s.getMetadata(), c.err);
    } else {
      assert.deepEqual(await s.getMetadata(), c.want);
    }
  });
}

test('requests: routes under the base URL, the hash escaped, the bearer token', async (t) => {
  const f = await fakeBigseg(t, (req, res) => {
    if (req.url.startsWith('/behind/proxy/memberships?')) answer(200, json, '{"memberships":{},"status":"HEALTHY"}')(req, res);
    else if (req.url === '/behind/proxy/status') answer(200, json, '{"available":true,"lastSynchronizedOn":1}')(req, res);
    else answer(404, json, '{"error":"no such route"}')(req, res);
  });
  const s = store(t, { baseUrl: `${f.url}/behind/proxy/`, bearerToken: ` ${TOKEN}\n` });
  assert.equal(await s.getUserMembership(HASH), undefined);
  assert.deepEqual(await s.getMetadata(), { lastUpToDate: 1 });
  assert.deepEqual(
    f.requests.map((r) => [r.method, r.url, r.headers.authorization, r.headers.accept]),
    [
      ['GET', '/behind/proxy/memberships?contextHash=YeoIA%2FiFNSO3d9QUrOMTDNTT%2BS3izX%2F4aVwzfXnC7u4%3D', `Bearer ${TOKEN}`, 'application/json'],
      ['GET', '/behind/proxy/status', `Bearer ${TOKEN}`, 'application/json'],
    ],
  );
  assert.equal(new URL(f.requests[0].url, f.url).searchParams.get('contextHash'), HASH);

  await t.test('no token, no Authorization', async (t) => {
    const f = await fakeBigseg(t, answer(200, json, '{"memberships":{},"status":"HEALTHY"}'));
    await store(t, { baseUrl: f.url }).getUserMembership(HASH);
    assert.equal(f.requests[0].headers.authorization, undefined);
  });
});

test('a hostile server never gets the token into errors', async (t) => {
  const echo = (status, contentType, format) => (req, res) => {
    const auth = req.headers.authorization;
    res.writeHead(status, { 'content-type': `${contentType}; x=${auth}`, 'retry-after': auth });
    res.end(format.replace('%s', auth));
  };
  const handlers = {
    '401 JSON': echo(401, json, '{"error":"token %s refused"}'),
    '503 STORE_ERROR': echo(503, json, '{"status":"STORE_ERROR","error":"%s"}'),
    '500 text': echo(500, 'text/plain', 'token: %s'),
    '429': echo(429, json, '{"error":"%s"}'),
    '200 not JSON': echo(200, 'text/plain', '%s'),
    '200 status': echo(200, json, '{"memberships":{},"status":"%s"}'),
    '200 bad map values': echo(200, json, '{"memberships":{"%s":"yes"},"status":"HEALTHY"}'),
    '200 hash': echo(200, json, '{"contextHash":"%s","memberships":{},"status":"HEALTHY"}'),
  };
  for (const [name, handler] of Object.entries(handlers)) {
    await t.test(name, async (t) => {
      const f = await fakeBigseg(t, handler);
      const s = store(t, { baseUrl: f.url, bearerToken: TOKEN });
      for (const call of [() => s.getUserMembership(HASH), () => s.getMetadata()]) {
        const err = await call().then(
          () => assert.fail('resolved; want a rejection'),
          (e) => e,
        );
        assert.ok(!String(err).includes(TOKEN), `the error holds the token: ${err}`);
      }
      assert.equal(f.requests[0].headers.authorization, `Bearer ${TOKEN}`, 'the server did not get the token: the test proves nothing');
    });
  }
});

test('transport errors and timeouts', async (t) => {
  await t.test('connection refused', async () => {
    const port = await new Promise((resolve) => {
      const srv = net.createServer().listen(0, '127.0.0.1', () => {
        const p = srv.address().port;
        srv.close(() => resolve(p));
      });
    });
    const s = BigsegBigSegmentStore({ baseUrl: `http://127.0.0.1:${port}`, bearerToken: TOKEN })();
    await assertRejects(s.getUserMembership(HASH), { kind: 'TRANSPORT', contains: 'ECONNREFUSED' });
    await assertRejects(s.getMetadata(), { kind: 'TRANSPORT', contains: 'ECONNREFUSED' });
    s.close();
  });

  const stall = (afterHeaders) => (req, res) => {
    if (afterHeaders) {
      res.writeHead(200, { 'content-type': json });
      res.write('{"memberships":{');
    }
    // and nothing more, until the client gives up
  };
  for (const [name, handler] of Object.entries({ 'no headers': stall(false), 'body stalls': stall(true) })) {
    await t.test(`timeout, ${name}`, async (t) => {
      const f = await fakeBigseg(t, handler);
      const s = store(t, { baseUrl: f.url, timeoutMs: 50 });
      await assertRejects(s.getUserMembership(HASH), { kind: 'TIMEOUT', contains: 'no answer within 50 ms' });
      await assertRejects(s.getMetadata(), { kind: 'TIMEOUT', contains: 'no answer within 50 ms' });
    });
  }
});

// fetch (undici) may open a second connection when a request starts before the previous one's
// socket is back in its pool; what matters is that connections are reused, not one per request.
test('keep-alive: a series of answers of every kind reuses its connections', async (t) => {
  const codes = [200, 503, 401, 429, 404, 200];
  let i = 0;
  const f = await fakeBigseg(t, (req, res) => {
    const code = codes[i++ % codes.length];
    if (code === 200) answer(200, json, '{"memberships":{"a.g1":true},"status":"HEALTHY","available":true,"lastSynchronizedOn":1}')(req, res);
    else answer(code, json, '{"status":"STORE_ERROR","error":"x"}')(req, res);
  });
  const s = store(t, { baseUrl: f.url });
  for (let k = 0; k < 3 * codes.length; k++) {
    await s.getUserMembership(HASH).catch(() => {});
    await s.getMetadata().catch(() => {});
  }
  assert.equal(f.requests.length, 6 * codes.length);
  assert.ok(f.opened() <= 2, `${f.opened()} connections for ${f.requests.length} sequential requests: not kept alive`);
});

test('close()', async (t) => {
  await t.test('aborts a request in flight, and leaves no timer', async (t) => {
    let entered;
    const inHandler = new Promise((resolve) => {
      entered = resolve;
    });
    const f = await fakeBigseg(t, () => entered()); // never answers
    const timersBefore = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const s = BigsegBigSegmentStore({ baseUrl: f.url, timeoutMs: 60000 })();
    const pending = s.getUserMembership(HASH);
    await inHandler;
    s.close();
    await assertRejects(pending, { kind: 'CLOSED' });
    const timersAfter = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    assert.equal(timersAfter, timersBefore, "the store's timeout timer outlived close()");
  });

  await t.test('calls after close() make no request', async (t) => {
    const f = await fakeBigseg(t, answer(200, json, '{"available":true,"lastSynchronizedOn":1}'));
    const s = BigsegBigSegmentStore({ baseUrl: f.url })();
    s.close();
    s.close();
    await assertRejects(s.getUserMembership(HASH), { kind: 'CLOSED' });
    await assertRejects(s.getMetadata(), { kind: 'CLOSED' });
    assert.equal(f.requests.length, 0);
  });
});

test('options are checked at configuration, without quoting secrets', () => {
  const cases = [
    [{ baseUrl: 'http://[::1' }, 'not a valid URL'],
    [{ baseUrl: 'bigseg:8080' }, 'scheme must be http or https, not "bigseg"'],
    [{ baseUrl: 'redis://bigseg:6379' }, 'not "redis"'],
    [{ baseUrl: 'http://user:pa55word@bigseg:8080' }, 'must not hold credentials'],
    [{ baseUrl: 'http://bigseg:8080/?contextHash=x' }, 'query'],
    [{ bearerToken: 'pa55 word' }, 'bearerToken'],
    [{ bearerToken: 'pa55\nword' }, 'bearerToken'],
    [{ bearerToken: 'pa55wörd' }, 'bearerToken'],
    [{ timeoutMs: 'soon' }, 'timeoutMs'],
    [{ timeoutMs: Number.NaN }, 'timeoutMs'],
    [{ maxRefs: '1000' }, 'maxRefs: must be a whole number'],
    [{ maxRefs: 1.5 }, 'maxRefs: must be a whole number'],
    [{ maxRefBytes: Number.POSITIVE_INFINITY }, 'maxRefBytes: must be a whole number'],
  ];
  for (const [options, want] of cases) {
    assert.throws(
      () => BigsegBigSegmentStore(options),
      (err) => err instanceof TypeError && err.message.includes(want) && !err.message.includes('pa55'),
      JSON.stringify(options),
    );
  }
});

test('the factory logs through the SDK logger: where it reads, and a warning for a token over plain HTTP', () => {
  const cases = [
    ['http://bigseg.internal:8080', TOKEN, true],
    ['https://bigseg.internal', TOKEN, false],
    ['http://127.0.0.1:8080', TOKEN, false],
    ['http://localhost:8080', TOKEN, false],
    ['http://[::1]:8080', TOKEN, false],
    ['http://bigseg.internal:8080', undefined, false],
  ];
  for (const [baseUrl, bearerToken, wantWarn] of cases) {
    const lines = [];
    const logger = {
      error: (m) => lines.push(`error: ${m}`),
      warn: (m) => lines.push(`warn: ${m}`),
      info: (m) => lines.push(`info: ${m}`),
      debug: (m) => lines.push(`debug: ${m}`),
    };
    BigsegBigSegmentStore({ baseUrl, bearerToken })({ basicConfiguration: { logger } }).close();
    assert.equal(lines.some((l) => l.startsWith('warn:') && l.includes('over plain HTTP')), wantWarn, `${baseUrl}: ${lines}`);
    assert.ok(lines.some((l) => l.startsWith('info:') && l.includes('bigseg at http')), `${baseUrl}: ${lines}`);
    assert.ok(!lines.some((l) => l.includes(TOKEN)), `a log line holds the token: ${lines}`);
  }
});
