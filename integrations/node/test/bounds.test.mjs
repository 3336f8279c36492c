// The bounds of one membership answer (maxRefs, maxRefBytes, and the body bound that follows
// from them) against a hostile in-process bigseg; and what they leave a real SDK's process to
// keep when every answer is at or over them.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import * as ld from '@launchdarkly/node-server-sdk';
import { BigsegBigSegmentStore, BigsegError, DEFAULT_MAX_REF_BYTES, DEFAULT_MAX_REFS } from '@bigseg/node-server-sdk-bigseg';

import { fakeBigseg } from './fake.mjs';

// The hash of "dave": it has each character a query string must escape ('+', '/', '=').
const HASH = 'YeoIA/iFNSO3d9QUrOMTDNTT+S3izX/4aVwzfXnC7u4=';
const json = 'application/json';

const PLAIN = '0123456789abcdefghijklmnopqrstuvwxyz';
// Characters that JSON.stringify (and bigseg's encoding/json) escape as \u00XX: 6 bytes each
// (\b, \t, \n, \f and \r are written in 2).
const ESCAPED = '\x00\x01\x02\x03\x04\x05\x06\x07\x0b\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f';

/**
 * n distinct refs of single-byte characters whose lengths add up to total: each starts with i
 * written in digits (so they differ) and is padded with pad.
 */
function makeRefs(n, total, digits, pad) {
  let width = 1;
  for (let p = digits.length; p < n; p *= digits.length) width++;
  const refs = [];
  for (let i = 0; i < n; i++) {
    const size = Math.floor(total / n) + (i < total % n ? 1 : 0);
    let ref = '';
    for (let k = 0, v = i; k < width; k++, v = Math.floor(v / digits.length)) ref += digits[v % digits.length];
    refs.push(ref.padEnd(size, pad));
  }
  return refs;
}

/** The memberships of refs: every other one excluded. */
function membershipsOf(refs) {
  const m = {};
  refs.forEach((ref, i) => {
    m[ref] = i % 2 === 0;
  });
  return m;
}

/** A lookup answer listing refs, as bigseg writes it (for hash, unless it is ''). */
function membershipsJSON(hash, refs) {
  return JSON.stringify({ ...(hash ? { contextHash: hash } : {}), memberships: membershipsOf(refs), status: 'HEALTHY' });
}

/**
 * A handler answering /status as available and every lookup with body (chunked: no
 * Content-Length), or with body(n) for the nth lookup.
 */
function hostile(body) {
  let n = 0;
  const bytes = typeof body === 'function' ? undefined : Buffer.from(body);
  return (req, res) => {
    res.writeHead(200, { 'content-type': json });
    if (req.url.endsWith('/status')) res.end(JSON.stringify({ available: true, lastSynchronizedOn: Date.now() }));
    else res.end(bytes ?? body(n++));
  };
}

// An answer of the hostile round: just under the old 1 MiB bound (59,000 refs of 9 bytes), a
// map that took an SDK with its cache of 1000 contexts to 3 GiB of heap.
const nearOneMiB = membershipsJSON('', makeRefs(59000, 9 * 59000, PLAIN, 'g'));
const suffix = (refs, s) => refs.map((ref) => ref + s);

const cases = [
  { name: 'exactly maxRefs', refs: makeRefs(1000, 8000, PLAIN, 'r') },
  { name: 'one ref over maxRefs', refs: makeRefs(1001, 8008, PLAIN, 'r'), over: 'more than 1000 segment refs (maxRefs)' },
  { name: 'exactly maxRefBytes, in long refs', refs: makeRefs(64, 64 * 1024, PLAIN, 'r') },
  { name: 'one long ref over maxRefBytes', refs: makeRefs(65, 65 * 1024, PLAIN, 'r'), over: 'more than 65536 bytes of segment refs (maxRefBytes)' },
  { name: 'one byte over maxRefBytes', refs: makeRefs(1000, 64 * 1024 + 1, PLAIN, 'r'), over: 'more than 65536 bytes of segment refs (maxRefBytes)' },
  { name: 'exactly at both bounds', refs: makeRefs(1000, 64 * 1024, PLAIN, 'r') },
  // The longest JSON an answer within the bounds can be: the body bound admits it.
  { name: 'exactly at both bounds, every ref byte escaped', refs: makeRefs(1000, 64 * 1024, ESCAPED, '\x1f') },
  {
    name: 'bytes are UTF-8 bytes: exactly maxRefBytes, mostly in two-byte characters',
    refs: suffix(makeRefs(512, 512 * 4, PLAIN, 'r'), 'é'.repeat(62)), // 128 bytes each
  },
  {
    name: 'bytes are UTF-8 bytes: one over maxRefBytes',
    refs: [...suffix(makeRefs(512, 512 * 4, PLAIN, 'r'), 'é'.repeat(62)), 'x'],
    over: 'more than 65536 bytes of segment refs (maxRefBytes)',
  },
  { name: 'far over maxRefs, within the body bound', refs: makeRefs(30000, 90000, PLAIN, 'r'), over: 'more than 1000 segment refs (maxRefs)' },
  {
    // The bounds are checked before JSON.parse: what follows is never parsed.
    name: 'over maxRefs, then not JSON',
    body: `{"memberships":{"${makeRefs(1001, 8008, PLAIN, 'r').join('":true,"')}":true, and then no JSON`,
    over: 'more than 1000 segment refs (maxRefs)',
  },
  { name: "the hostile round's answer, just under 1 MiB: over the body bound", body: nearOneMiB, over: 'more than the 406312 bytes this store reads' },
  { name: 'maxRefs 10: 10 refs', options: { maxRefs: 10 }, refs: makeRefs(10, 100, PLAIN, 'r') },
  { name: 'maxRefs 10: 11 refs', options: { maxRefs: 10 }, refs: makeRefs(11, 110, PLAIN, 'r'), over: 'more than 10 segment refs (maxRefs)' },
  { name: 'maxRefBytes 100: 101 bytes', options: { maxRefBytes: 100 }, refs: makeRefs(10, 101, PLAIN, 'r'), over: 'more than 100 bytes of segment refs (maxRefBytes)' },
  {
    name: 'maxRefBytes 100: the body bound follows (6 × 100 + 9 × 1000 + 4096)',
    options: { maxRefBytes: 100 },
    body: `{"memberships":{},"status":"HEALTHY","pad":"${'x'.repeat(6 * 100 + 9 * 1000 + 4096)}"}`,
    over: 'more than the 13696 bytes this store reads',
  },
  { name: "raised bounds admit the hostile round's answer", options: { maxRefs: 59000, maxRefBytes: 9 * 59000 }, refs: makeRefs(59000, 9 * 59000, PLAIN, 'g') },
  {
    name: 'zero and negative mean the defaults',
    options: { maxRefs: 0, maxRefBytes: -1 },
    refs: makeRefs(1001, 8008, PLAIN, 'r'),
    over: 'more than 1000 segment refs (maxRefs)',
  },
];

for (const c of cases) {
  test(`bounds: ${c.name}`, async (t) => {
    const f = await fakeBigseg(t, hostile(c.body ?? membershipsJSON(HASH, c.refs)));
    const s = BigsegBigSegmentStore({ baseUrl: f.url, ...c.options })();
    t.after(() => s.close());
    if (!c.over) {
      assert.deepEqual(await s.getUserMembership(HASH), membershipsOf(c.refs));
      return;
    }
    const err = await s.getUserMembership(HASH).then(
      (m) => assert.fail(`resolved with ${Object.keys(m || {}).length} refs; want a rejection`),
      (e) => e,
    );
    assert.ok(err instanceof BigsegError, String(err));
    assert.equal(err.kind, 'TOO_LARGE', err.message);
    assert.equal(err.status, 200);
    assert.ok(err.message.includes(`the answer is over the store's bounds: ${c.over}`), err.message);
  });
}

test('the defaults are exported', () => {
  assert.equal(DEFAULT_MAX_REFS, 1000);
  assert.equal(DEFAULT_MAX_REF_BYTES, 65536);
});

// --- what a real SDK keeps ---

const FLAG = 'new-checkout';
const FLAG_DATA = {
  flags: {
    [FLAG]: {
      key: FLAG,
      version: 1,
      on: true,
      salt: 'f',
      variations: ['everyone-else', 'in-segment'],
      offVariation: 0,
      fallthrough: { variation: 0 },
      rules: [{ id: 'beta', variation: 1, clauses: [{ attribute: 'key', op: 'segmentMatch', values: ['beta-testers'] }] }],
    },
  },
  segments: { 'beta-testers': { key: 'beta-testers', version: 1, salt: 's', unbounded: true, generation: 3 } },
};

/** The heap in use after full collections, or undefined without --expose-gc (npm test sets it). */
function heapUsed() {
  if (typeof globalThis.gc !== 'function') return undefined;
  globalThis.gc();
  globalThis.gc();
  return process.memoryUsage().heapUsed;
}

const MiB = 1024 * 1024;
const CACHE = 1000; // the SDK's bigSegments.userCacheSize by default

// The most heap CACHE answers within the default bounds may keep (about 133 MiB measured at both
// bounds): each ref byte at most twice over (V8 keeps these strings at one byte a character),
// and 128 bytes per ref (its string's header and its property in an object in dictionary
// mode, whose table may be half empty). For 1000 answers, 247 MiB; the same bound as Go's.
const RETAINED_BOUND = CACHE * (2 * DEFAULT_MAX_REF_BYTES + 128 * DEFAULT_MAX_REFS);

// A real SDK client (its cache at 1000 contexts) evaluates 1200 distinct contexts against a
// hostile bigseg answering every lookup with the same map. Over the bounds, every evaluation is
// STORE_ERROR, the SDK logs which bound, and its heap keeps none of the answers; at the bounds,
// every evaluation is HEALTHY and the heap keeps at most RETAINED_BOUND.
// 1000 refs at both bounds, each 2 digits, '~~~~~' and padding: the lookups replace '~~~~~' with
// their number.
const atBounds = membershipsJSON('', suffix(makeRefs(1000, 64 * 1024 - 5000, PLAIN, 'r'), '~~~~~'));
const sdkCases = [
  { name: "the hostile round's answer, just under 1 MiB", body: nearOneMiB, status: 'STORE_ERROR', bound: 16 * MiB, log: 'more than the 406312 bytes' },
  { name: '30,000 refs, within the body bound', body: membershipsJSON('', makeRefs(30000, 90000, PLAIN, 'r')), status: 'STORE_ERROR', bound: 16 * MiB, log: 'more than 1000 segment refs' },
  {
    // Refs that differ from one answer to the next, so that V8 cannot share them between
    // answers (JSON.parse internalizes keys).
    name: 'exactly at both bounds, other refs in every answer',
    body: (n) => atBounds.replaceAll('~~~~~', n.toString(36).padStart(5, '0')),
    status: 'HEALTHY',
    bound: RETAINED_BOUND,
  },
];

for (const c of sdkCases) {
  test(`an SDK under a hostile bigseg: ${c.name}`, async (t) => {
    const f = await fakeBigseg(t, hostile(c.body));
    const dir = mkdtempSync(path.join(tmpdir(), 'bigseg-node-bounds-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(path.join(dir, 'flags.json'), JSON.stringify(FLAG_DATA));
    let errors = 0;
    let firstError = '';
    const logger = {
      error: (...args) => {
        errors += 1;
        firstError ||= args.join(' ');
      },
      warn() {},
      info() {},
      debug() {},
    };
    const files = new ld.integrations.FileDataSourceFactory({ paths: [path.join(dir, 'flags.json')] });
    const client = ld.init('sdk-key-unused-offline', {
      updateProcessor: files.getFactory(),
      sendEvents: false,
      diagnosticOptOut: true,
      logger,
      bigSegments: { store: BigsegBigSegmentStore({ baseUrl: f.url }), userCacheSize: CACHE },
    });
    t.after(() => client.close());
    await client.waitForInitialization({ timeout: 10 });

    const before = heapUsed();
    const contexts = CACHE + 200;
    for (let i = 0; i < contexts; i++) {
      const detail = await client.variationDetail(FLAG, { kind: 'user', key: `context-${i}` }, 'default');
      assert.equal(detail.reason.bigSegmentsStatus, c.status, `context ${i}`);
    }
    const after = heapUsed();
    if (c.log) {
      assert.equal(errors, contexts, 'one error logged per lookup');
      assert.ok(firstError.includes(`the answer is over the store's bounds: ${c.log}`), firstError);
    }
    if (before === undefined) {
      t.diagnostic('no gc(): run with --expose-gc (as npm test does) to measure the heap');
      return;
    }
    const grown = after - before;
    const size = (typeof c.body === 'function' ? c.body(0) : c.body).length;
    t.diagnostic(`${contexts} contexts, answers of ${size} bytes: heap used grew ${(grown / MiB).toFixed(1)} MiB (bound ${(c.bound / MiB).toFixed(1)} MiB)`);
    assert.ok(grown <= c.bound, `the heap used grew ${grown} bytes, more than the bound of ${c.bound}`);
  });
}
