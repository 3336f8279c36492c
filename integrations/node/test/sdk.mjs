// The real @launchdarkly/node-server-sdk for the end-to-end tests: a flag with a Big Segment
// rule from a file (its FileDataSourceFactory), no events, and the adapter as its Big Segment
// store.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import * as ld from '@launchdarkly/node-server-sdk';
import { BigsegBigSegmentStore } from '@bigseg/node-server-sdk-bigseg';

import { MirroredLayout, waitFor } from './support.mjs';

// A flag whose rule matches the unbounded (Big) segment "beta-testers", generation 3: its ref
// in the Big Segments data is "beta-testers.g3". The segment has a rule of its own (tier
// "gold"), which the SDK applies only to contexts the Big Segment data does not mention: an
// excluded context with tier gold is still out, which makes the exclusion visible.
export const FLAG = 'new-checkout';
export const REF = 'beta-testers.g3';
export const IN = 'in-segment';
export const OUT = 'everyone-else';
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

let dataDir;

/** The flag file, written once per test file; removeFlagData() removes it. */
function flagFile() {
  if (!dataDir) {
    dataDir = mkdtempSync(path.join(tmpdir(), 'bigseg-node-flags-'));
    writeFileSync(path.join(dataDir, 'flags.json'), JSON.stringify(FLAG_DATA));
  }
  return path.join(dataDir, 'flags.json');
}

export function removeFlagData() {
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  dataDir = undefined;
}

/** A logger keeping every line, for checks and for failure output. */
export function captureLogger() {
  const lines = [];
  const at = (level) => (...args) => lines.push(`${level}: ${args.join(' ')}`);
  return { lines, error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug') };
}

/**
 * A real SDK client reading Big Segments through the adapter with storeOptions (those of
 * BigsegBigSegmentStore); status polled every 50 ms; closed when the test ends.
 */
export async function sdkClient(t, storeOptions, logger = captureLogger()) {
  const files = new ld.integrations.FileDataSourceFactory({ paths: [flagFile()] });
  const client = ld.init('sdk-key-unused-offline', {
    updateProcessor: files.getFactory(),
    sendEvents: false,
    diagnosticOptOut: true,
    logger,
    bigSegments: { store: BigsegBigSegmentStore(storeOptions), statusPollInterval: 0.05 },
  });
  t.after(() => {
    client.close();
  });
  await client.waitForInitialization({ timeout: 10 });
  return client;
}

/** Evaluates the flag for a user with key (and tier): its value and bigSegmentsStatus. */
export async function evaluate(client, key, tier) {
  const detail = await client.variationDetail(FLAG, { kind: 'user', key, ...(tier ? { tier } : {}) }, 'default');
  return { value: detail.value, status: detail.reason.bigSegmentsStatus };
}

/** Waits until the client's Big Segment store status is want ({ available, stale }). */
export async function waitStatus(client, want) {
  await waitFor(`the SDK to report the Big Segment store ${JSON.stringify(want)}`, () => {
    const st = client.bigSegmentStoreStatusProvider.getStatus();
    return st !== undefined && st.available === want.available && st.stale === want.stale;
  });
}

/** Waits until the client's Big Segment store status is available and fresh, or unavailable. */
export function waitAvailable(client, available) {
  return waitStatus(client, { available, stale: false });
}

/**
 * The ways a bigseg serves a test's data, and the SDK's store reads it, that the end-to-end
 * tests run in: unscoped (BIGSEG_PREFIX and the unscoped routes), and as the environment
 * staging of three (BIGSEG_ENVIRONMENTS) read with the environment option, while production and
 * qa hold the opposite (MirroredLayout).
 */
export const DEPLOYMENTS = [
  { name: 'unscoped', environment: undefined },
  { name: 'environment staging of three', environment: 'staging' },
];

/** The deployment's writer of the test's data, on client under prefix, and bigseg's settings serving it. */
export function deploy(d, client, prefix) {
  if (!d.environment) return { data: new MirroredLayout(client, prefix), settings: { BIGSEG_PREFIX: prefix } };
  const others = { production: `${prefix}_production`, qa: `${prefix}_qa` };
  const pairs = [`${d.environment}=${prefix}`, ...Object.entries(others).map(([name, p]) => `${name}=${p}`)];
  return { data: new MirroredLayout(client, prefix, Object.values(others)), settings: { BIGSEG_ENVIRONMENTS: pairs.join(',') } };
}
