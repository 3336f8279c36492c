// The package loads from CommonJS and from ES modules, by its name, to the same implementation.

const { test } = require('node:test');
const assert = require('node:assert/strict');

test('require() and import() give the same store factory and error class', async () => {
  const cjs = require('@bigseg/node-server-sdk-bigseg');
  const esm = await import('@bigseg/node-server-sdk-bigseg');
  for (const name of ['BigsegBigSegmentStore', 'BigsegError', 'DEFAULT_BASE_URL', 'DEFAULT_TIMEOUT_MS', 'DEFAULT_MAX_REFS', 'DEFAULT_MAX_REF_BYTES']) {
    assert.ok(cjs[name] !== undefined, `require() lacks ${name}`);
    assert.equal(esm[name], cjs[name], `import() and require() differ on ${name}`);
  }
  const store = cjs.BigsegBigSegmentStore({ baseUrl: 'http://127.0.0.1:8080' })();
  for (const method of ['getMetadata', 'getUserMembership', 'close']) {
    assert.equal(typeof store[method], 'function', `the store lacks ${method}()`);
  }
  store.close();
  await assert.rejects(store.getMetadata(), (err) => err instanceof esm.BigsegError && err.kind === 'CLOSED');
});
