// A DynamoDB for the tests: a moto_server process (moto's emulator) on a port it picks itself,
// a table per test, and writes of LaunchDarkly's DynamoDB layout as the Relay Proxy makes
// them, with @aws-sdk/client-dynamodb. Without moto_server the tests that need it skip, unless
// BIGSEG_TEST_REQUIRE_REDIS=1 (which asks for every outside system the tests use).

import { spawn, execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

import {
  CreateTableCommand,
  DeleteItemCommand,
  DeleteTableCommand,
  DynamoDBClient,
  GetItemCommand,
  ListTablesCommand,
  TransactWriteItemsCommand,
  UpdateItemCommand,
  paginateQuery,
} from '@aws-sdk/client-dynamodb';

import { waitFor } from './support.mjs';

const REGION = 'us-east-1';
const CREDENTIALS = { accessKeyId: 'ldbigsegtest', secretAccessKey: 'ldbigsegtest' };

/**
 * Why the DynamoDB tests cannot run (a skip reason), or false when moto_server is on PATH.
 * With BIGSEG_TEST_REQUIRE_REDIS=1 a missing moto_server throws instead.
 */
export async function motoUnavailable() {
  try {
    await promisify(execFile)('sh', ['-c', 'command -v moto_server']);
    return false;
  } catch {
    if (process.env.BIGSEG_TEST_REQUIRE_REDIS === '1') throw new Error('moto_server is not installed (BIGSEG_TEST_REQUIRE_REDIS=1)');
    return 'moto_server is not installed; put moto_server (moto[server]) on PATH, or set BIGSEG_TEST_REQUIRE_REDIS=1 to fail instead';
  }
}

/**
 * Starts moto_server on port 0 in a process group of its own (moto_server may be a wrapper
 * such as pyenv's shim), reads its port from the line it logs, and resolves once it answers
 * a DynamoDB call. stop() kills the group; so does this process's exit.
 */
export async function startMoto() {
  const child = spawn('moto_server', ['-H', '127.0.0.1', '-p', '0'], {
    env: { ...process.env, PYTHONUNBUFFERED: '1' },
    stdio: ['ignore', 'ignore', 'pipe'],
    detached: true,
  });
  const kill = () => {
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  };
  process.once('exit', kill);
  let log = '';
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`moto_server did not say where it listens within 60s:\n${log}`)), 60000);
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk) => {
      log = (log + chunk).slice(-8000); // a line a request: keep the end
      const m = /Running on (http:\/\/127\.0\.0\.1:[0-9]+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`moto_server exited (${code}) before listening:\n${log}`));
    });
  }).catch((err) => {
    kill();
    throw err;
  });
  const m = {
    url,
    log: () => log,
    /** A client of the server with fake credentials; destroy() it when done. */
    client: () => new DynamoDBClient({ region: REGION, endpoint: url, credentials: CREDENTIALS }),
    /**
     * The settings with which bigseg reads table on the server: the AWS SDK's own variables
     * (endpoint, region, fake credentials; no profile or instance role of this machine) and
     * BIGSEG_DYNAMODB_TABLE. configDir is a directory for the (absent) AWS config files.
     */
    bigsegSettings: (table, configDir) => ({
      BIGSEG_DYNAMODB_TABLE: table,
      AWS_ENDPOINT_URL_DYNAMODB: url,
      AWS_REGION: REGION,
      AWS_ACCESS_KEY_ID: CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: CREDENTIALS.secretAccessKey,
      AWS_CONFIG_FILE: path.join(configDir, 'config'),
      AWS_SHARED_CREDENTIALS_FILE: path.join(configDir, 'credentials'),
      AWS_EC2_METADATA_DISABLED: 'true',
    }),
    async stop() {
      process.removeListener('exit', kill);
      kill();
      await exited;
    },
  };
  const c = m.client();
  try {
    await waitFor('moto_server to answer ListTables', async () => {
      try {
        await c.send(new ListTablesCommand({}));
        return true;
      } catch {
        return false;
      }
    }, 30000);
  } catch (err) {
    await m.stop();
    throw new Error(`${err.message}:\n${log}`);
  } finally {
    c.destroy();
  }
  return m;
}

/** A temporary directory, and a function that removes it. */
export function tempDir() {
  const dir = mkdtempSync(path.join(tmpdir(), 'bigseg-node-aws-'));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * Creates a table of LaunchDarkly's DynamoDB schema (partition key "namespace", sort key
 * "key", both strings) that no other test uses; resolves its name. Delete it with dropTable.
 */
export async function createTable(client, name) {
  const table = `ldbigseg-node-${name.replace(/[^A-Za-z0-9_.-]+/g, '_').slice(0, 40)}-${randomBytes(4).toString('hex')}`;
  await client.send(
    new CreateTableCommand({
      TableName: table,
      BillingMode: 'PAY_PER_REQUEST',
      AttributeDefinitions: [
        { AttributeName: 'namespace', AttributeType: 'S' },
        { AttributeName: 'key', AttributeType: 'S' },
      ],
      KeySchema: [
        { AttributeName: 'namespace', KeyType: 'HASH' },
        { AttributeName: 'key', KeyType: 'RANGE' },
      ],
    }),
  );
  return table;
}

export function dropTable(client, table) {
  return client.send(new DeleteTableCommand({ TableName: table }));
}

const itemKey = (namespace, key) => ({ namespace: { S: namespace }, key: { S: key } });

/**
 * Writes Big Segments data in LaunchDarkly's DynamoDB layout under a prefix ('' for none,
 * LaunchDarkly's DynamoDB default), spelled out here rather than taken from bigseg: a context
 * is namespace "{prefix}:big_segments_user" ("big_segments_user" with no prefix), key its
 * hash, string sets "included" and "excluded"; the metadata is namespace and key
 * "{prefix}:big_segments_metadata", with "synchronizedOn" (a number, unix ms) and
 * "lastVersion" (a string, the synchronizer's version). The methods are LDLayout's.
 */
export class LDDynamoLayout {
  constructor(client, table, prefix = '') {
    this.c = client;
    this.table = table;
    this.prefix = prefix;
  }

  namespace(base) {
    return this.prefix ? `${this.prefix}:${base}` : base;
  }

  get userNamespace() {
    return this.namespace('big_segments_user');
  }

  get metadataKey() {
    return this.namespace('big_segments_metadata');
  }

  /** An UpdateItem of synchronizedOn, as the Relay Proxy makes after every synchronization. */
  setSynchronizedOn(ms) {
    return this.c.send(
      new UpdateItemCommand({
        TableName: this.table,
        Key: itemKey(this.metadataKey, this.metadataKey),
        UpdateExpression: 'SET #s = :s',
        ExpressionAttributeNames: { '#s': 'synchronizedOn' },
        ExpressionAttributeValues: { ':s': { N: String(ms) } },
      }),
    );
  }

  setSynchronizedNow() {
    return this.setSynchronizedOn(Date.now());
  }

  /**
   * Adds refs to a context hash's sets as the Relay Proxy applies a patch: a
   * TransactWriteItems of a ConditionCheck that the metadata's lastVersion is still the one
   * read (or absent) and an Update that ADDs to the string sets; then an UpdateItem that sets
   * lastVersion to the next version.
   */
  async setMembership(hash, included = [], excluded = []) {
    const meta = itemKey(this.metadataKey, this.metadataKey);
    const got = await this.c.send(new GetItemCommand({ TableName: this.table, Key: meta, ConsistentRead: true }));
    const previous = got.Item?.lastVersion?.S;
    const check = { TableName: this.table, Key: meta, ExpressionAttributeNames: { '#v': 'lastVersion' } };
    if (previous === undefined) {
      check.ConditionExpression = 'attribute_not_exists(#v)';
    } else {
      check.ConditionExpression = '#v = :prev';
      check.ExpressionAttributeValues = { ':prev': { S: previous } };
    }
    const adds = [];
    const names = {};
    const values = {};
    for (const [i, [attr, refs]] of [
      ['included', included],
      ['excluded', excluded],
    ].entries()) {
      if (!refs.length) continue; // a set cannot be empty
      adds.push(`#a${i} :r${i}`);
      names[`#a${i}`] = attr;
      values[`:r${i}`] = { SS: refs };
    }
    if (!adds.length) return;
    await this.c.send(
      new TransactWriteItemsCommand({
        TransactItems: [
          { ConditionCheck: check },
          {
            Update: {
              TableName: this.table,
              Key: itemKey(this.userNamespace, hash),
              UpdateExpression: `ADD ${adds.join(', ')}`,
              ExpressionAttributeNames: names,
              ExpressionAttributeValues: values,
            },
          },
        ],
      }),
    );
    await this.c.send(
      new UpdateItemCommand({
        TableName: this.table,
        Key: meta,
        UpdateExpression: 'SET #v = :v',
        ExpressionAttributeNames: { '#v': 'lastVersion' },
        ExpressionAttributeValues: { ':v': { S: String(Number(previous ?? 0) + 1) } },
      }),
    );
  }

  /** Deletes every context item and the metadata item under the prefix. */
  async clear() {
    const keys = [itemKey(this.metadataKey, this.metadataKey)];
    const pages = paginateQuery(
      { client: this.c },
      {
        TableName: this.table,
        ConsistentRead: true,
        KeyConditionExpression: '#n = :n',
        ProjectionExpression: '#n, #k',
        ExpressionAttributeNames: { '#n': 'namespace', '#k': 'key' },
        ExpressionAttributeValues: { ':n': { S: this.userNamespace } },
      },
    );
    for await (const page of pages) keys.push(...(page.Items ?? []));
    for (const Key of keys) await this.c.send(new DeleteItemCommand({ TableName: this.table, Key }));
  }
}
