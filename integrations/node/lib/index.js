'use strict';

/**
 * A Big Segment store for the LaunchDarkly server-side JavaScript SDKs that reads bigseg over
 * HTTP (`fetch`), in place of a Redis connection in every SDK instance:
 *
 *   const { BigsegBigSegmentStore } = require('@bigseg/node-server-sdk-bigseg');
 *   ld.init(sdkKey, { bigSegments: { store: BigsegBigSegmentStore({ baseUrl: 'http://bigseg:8080' }) } });
 *
 * The SDK keeps its membership cache and status poller in front of the store: it calls
 * getUserMembership only on a cache miss (one GET /memberships?contextHash=...) and getMetadata
 * at each status poll (one GET /status, which bigseg answers from its own last poll). Every
 * answer that is not a usable one rejects with a BigsegError, so that the SDK reports the store
 * as unavailable and evaluations get bigSegmentsStatus "STORE_ERROR", as with Redis.
 *
 * It uses only fetch, AbortController, URL and TextDecoder, so the same code runs on Node 18+
 * and on edge runtimes.
 */

/** Where the store finds bigseg unless baseUrl says otherwise: bigseg's default address. */
const DEFAULT_BASE_URL = 'http://localhost:8080';

/**
 * How long a request may take, from sending it to reading the whole answer. Longer than bigseg
 * takes to give up on a failing Redis (about 2 s at worst with its defaults), so the SDK sees
 * bigseg's own 503 rather than a timeout; short enough to bound an evaluation that misses the
 * SDK's cache.
 */
const DEFAULT_TIMEOUT_MS = 3000;

/** The most of an answer the store reads: bigseg's are a few hundred bytes. */
const MAX_RESPONSE_BYTES = 1024 * 1024;

const MAX_MESSAGE_CHARS = 200;
const OP_MEMBERSHIP = 'bigseg membership';
const OP_STATUS = 'bigseg status';

/**
 * The error of every call that did not get a usable answer. `kind` says which way it failed:
 *
 * - `STORE_UNAVAILABLE`: bigseg says its store cannot be read (a 503 with status STORE_ERROR, a
 *   200 lookup with status STORE_ERROR, or /status with "available": false);
 * - `HTTP`: another status code (`status`, and `retryAfter` for a 429);
 * - `BAD_RESPONSE`: a 200 that is not bigseg's JSON, or an answer over MAX_RESPONSE_BYTES;
 * - `TIMEOUT`: no whole answer within timeoutMs;
 * - `TRANSPORT`: no answer (connection refused, reset, DNS);
 * - `CLOSED`: the store was closed.
 *
 * Messages never hold the bearer token.
 */
class BigsegError extends Error {
  constructor(message, { kind, status, retryAfter, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'BigsegError';
    this.kind = kind;
    if (status !== undefined) this.status = status;
    if (retryAfter) this.retryAfter = retryAfter;
  }
}

const STATUS_HINTS = {
  400: 'bigseg rejected the request',
  401: 'bigseg requires a bearer token and did not accept this one, or none was set',
  403: 'forbidden',
  404: "no such route: is the base URL bigseg's?",
  429: 'bigseg is shedding load',
};
const REDIRECT_HINT = "a redirect, which the store does not follow: set the base URL to bigseg's own address";

/**
 * Makes text from an answer fit for an error message: its first line, without control
 * characters, at most 200 characters, and with the bearer token replaced wherever it occurs (a
 * broken or hostile server could echo the request's headers).
 */
function cleanMessage(text, token) {
  let s = String(text);
  if (token) s = s.split(token).join('[bearer token]');
  s = s.split(/\r|\n/)[0].replace(/[\u0000-\u001f\u007f\ufffd]/g, '');
  if (s.length > MAX_MESSAGE_CHARS) s = `${s.slice(0, MAX_MESSAGE_CHARS)}...`;
  return s.trim();
}

/** RFC 6750 b64token: what a bearer token may hold. */
const TOKEN_PATTERN = /^[A-Za-z0-9\-._~+/]+=*$/;

/** Checks the options and returns the store's settings. Errors never quote the token. */
function resolveOptions(options) {
  const opts = options || {};
  let url;
  try {
    url = new URL(opts.baseUrl === undefined ? DEFAULT_BASE_URL : String(opts.baseUrl).trim());
  } catch {
    throw new TypeError('bigseg baseUrl: not a valid URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new TypeError(`bigseg baseUrl: scheme must be http or https, not "${url.protocol.replace(/:$/, '')}"`);
  }
  if (url.username || url.password) {
    throw new TypeError('bigseg baseUrl: must not hold credentials (fetch refuses them): use bearerToken');
  }
  if (url.search || url.hash) {
    throw new TypeError('bigseg baseUrl: must not have a query or a fragment');
  }
  const base = url.origin + url.pathname.replace(/\/+$/, '');

  const token = opts.bearerToken === undefined || opts.bearerToken === null ? '' : String(opts.bearerToken).trim();
  if (token && !TOKEN_PATTERN.test(token)) {
    throw new TypeError('bigseg bearerToken: holds a character a bearer token cannot');
  }

  let timeoutMs = opts.timeoutMs;
  if (timeoutMs === undefined || timeoutMs === null) {
    timeoutMs = DEFAULT_TIMEOUT_MS;
  } else if (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs)) {
    throw new TypeError('bigseg timeoutMs: must be a finite number of milliseconds');
  } else if (timeoutMs <= 0) {
    timeoutMs = DEFAULT_TIMEOUT_MS; // never unbounded
  }

  const headers = { accept: 'application/json', 'user-agent': 'ldbigseg-node' };
  if (token) headers.authorization = `Bearer ${token}`;
  return {
    base,
    host: url.host,
    plainHttpOffHost: url.protocol === 'http:' && !isLoopback(url.hostname),
    membershipUrl: `${base}/memberships?contextHash=`,
    statusUrl: `${base}/status`,
    token,
    headers,
    timeoutMs,
  };
}

function isLoopback(hostname) {
  return hostname === 'localhost' || hostname === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(hostname);
}

/**
 * Returns the factory that the SDK's `bigSegments.store` option takes.
 *
 * @param {{ baseUrl?: string, bearerToken?: string, timeoutMs?: number }} [options]
 *   `baseUrl`: bigseg's address, with a path if it is served under one (default
 *   http://localhost:8080). `bearerToken`: sent as `Authorization: Bearer ...` when bigseg
 *   requires one (BIGSEG_API_TOKENS). `timeoutMs`: bound of each request (default 3000; zero or
 *   less means the default).
 */
function BigsegBigSegmentStore(options) {
  const settings = resolveOptions(options); // fails at configuration, not at the first evaluation
  return (clientContext) => {
    const logger = clientContext && clientContext.basicConfiguration && clientContext.basicConfiguration.logger;
    if (logger) {
      logger.info(`Big Segment store: bigseg at ${settings.base}`);
      if (settings.token && settings.plainHttpOffHost) {
        logger.warn(`Big Segment store: the bigseg bearer token is sent to ${settings.host} over plain HTTP; use https:// off the local host`);
      }
    }
    return new BigsegStore(settings);
  };
}

/** The store the SDK calls. Safe for concurrent calls. */
class BigsegStore {
  constructor(settings) {
    this._s = settings;
    this._closed = false;
    this._inflight = new Set();
  }

  /** GET /status: lastSynchronizedOn as lastUpToDate (absent when never synchronized). */
  async getMetadata() {
    const a = await this._get(OP_STATUS, this._s.statusUrl);
    if (a.status !== 200) throw this._httpError(OP_STATUS, a);
    const body = this._parse(OP_STATUS, a);
    if (body === null || typeof body !== 'object' || typeof body.available !== 'boolean') {
      throw this._badResponse(OP_STATUS, a, 'no "available"');
    }
    if (!body.available) {
      const why = body.checkedAt == null ? 'bigseg has not polled it yet' : "bigseg's last status poll could not read it";
      throw new BigsegError(`${OP_STATUS}: bigseg's store is unavailable (${why})`, { kind: 'STORE_UNAVAILABLE', status: 200 });
    }
    const n = body.lastSynchronizedOn;
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) {
      throw this._badResponse(OP_STATUS, a, 'no valid "lastSynchronizedOn"');
    }
    return n > 0 ? { lastUpToDate: n } : {};
  }

  /**
   * GET /memberships?contextHash=: the memberships (ref to true for included, false for
   * excluded), or undefined when there are none.
   */
  async getUserMembership(userHash) {
    const a = await this._get(OP_MEMBERSHIP, this._s.membershipUrl + encodeURIComponent(userHash));
    if (a.status !== 200) {
      const err = this._httpError(OP_MEMBERSHIP, a);
      if (a.status === 503 && this._tryParse(a.text)?.status === 'STORE_ERROR') {
        throw new BigsegError(`${OP_MEMBERSHIP}: bigseg's store is unavailable: ${err.message.slice(OP_MEMBERSHIP.length + 2)}`, {
          kind: 'STORE_UNAVAILABLE',
          status: 503,
        });
      }
      throw err;
    }
    const body = this._parse(OP_MEMBERSHIP, a);
    if (body === null || typeof body !== 'object') throw this._badResponse(OP_MEMBERSHIP, a, 'not an object');
    switch (body.status) {
      case 'HEALTHY':
      case 'STALE': // a good answer: the SDK judges staleness itself
        break;
      case 'STORE_ERROR':
        throw new BigsegError(`${OP_MEMBERSHIP}: bigseg's store is unavailable (the lookup's status is STORE_ERROR)`, {
          kind: 'STORE_UNAVAILABLE',
          status: 200,
        });
      default:
        throw this._badResponse(OP_MEMBERSHIP, a, `unknown status "${cleanMessage(body.status, this._s.token)}"`);
    }
    const m = body.memberships;
    if (m === null || typeof m !== 'object' || Array.isArray(m)) throw this._badResponse(OP_MEMBERSHIP, a, 'no memberships');
    if (body.contextHash !== undefined && body.contextHash !== userHash) {
      throw this._badResponse(OP_MEMBERSHIP, a, 'the answer is for another context hash');
    }
    const refs = Object.keys(m);
    for (const ref of refs) {
      if (typeof m[ref] !== 'boolean') throw this._badResponse(OP_MEMBERSHIP, a, 'a membership is not true or false');
    }
    return refs.length === 0 ? undefined : m;
  }

  /** Aborts requests in flight; calls after it reject with kind CLOSED. */
  close() {
    this._closed = true;
    for (const controller of this._inflight) controller.abort();
    this._inflight.clear();
  }

  /** One GET, read in full: bounded in time by timeoutMs and in size by MAX_RESPONSE_BYTES. */
  async _get(op, url) {
    if (this._closed) throw new BigsegError(`${op}: the bigseg store is closed`, { kind: 'CLOSED' });
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, this._s.timeoutMs);
    this._inflight.add(controller);
    try {
      const res = await fetch(url, { method: 'GET', headers: this._s.headers, signal: controller.signal, redirect: 'manual' });
      const text = await readBounded(res, op);
      return { status: res.status, type: res.type, headers: res.headers, text };
    } catch (err) {
      if (err instanceof BigsegError) throw err;
      if (this._closed) throw new BigsegError(`${op}: the bigseg store is closed`, { kind: 'CLOSED', cause: err });
      if (timedOut) throw new BigsegError(`${op}: no answer within ${this._s.timeoutMs} ms`, { kind: 'TIMEOUT', cause: err });
      const detail = [err && err.message, err && err.cause && (err.cause.message || err.cause.code)].filter(Boolean).join(': ');
      throw new BigsegError(`${op}: ${cleanMessage(detail, this._s.token)}`, { kind: 'TRANSPORT', cause: err });
    } finally {
      clearTimeout(timer);
      this._inflight.delete(controller);
    }
  }

  _tryParse(text) {
    try {
      return JSON.parse(text);
    } catch {
      return undefined;
    }
  }

  _parse(op, a) {
    try {
      return JSON.parse(a.text);
    } catch (err) {
      throw this._badResponse(op, a, err.message);
    }
  }

  /** Describes a 200 that is not bigseg's JSON, without quoting the body. */
  _badResponse(op, a, why) {
    const ct = cleanMessage(a.headers.get('content-type') || '', this._s.token);
    return new BigsegError(
      `${op}: HTTP ${a.status}: the answer is not bigseg's (Content-Type "${ct}", ${a.text.length} characters): ${cleanMessage(why, this._s.token)}`,
      { kind: 'BAD_RESPONSE', status: a.status },
    );
  }

  /** Describes an answer whose status code is not 200. */
  _httpError(op, a) {
    const token = this._s.token;
    let status = a.status;
    let hint = STATUS_HINTS[status];
    if ((status >= 300 && status < 400) || a.type === 'opaqueredirect') hint = REDIRECT_HINT;
    if (status === 0) status = 302; // an opaque redirect (browsers) hides its code
    let message = '';
    const body = this._tryParse(a.text);
    if (body && typeof body.error === 'string') {
      message = cleanMessage(body.error, token);
    } else if (/^text\//i.test(a.headers.get('content-type') || '')) {
      message = cleanMessage(a.text, token);
    }
    const retryAfter = cleanMessage(a.headers.get('retry-after') || '', token);
    let text = `${op}: HTTP ${status}`;
    if (hint) text += ` (${hint})`;
    if (retryAfter) text += `, Retry-After ${retryAfter}`;
    if (message) text += `: ${message}`;
    return new BigsegError(text, { kind: 'HTTP', status, retryAfter: retryAfter || undefined });
  }
}

/** Reads a response body as text, failing once it passes MAX_RESPONSE_BYTES. */
async function readBounded(res, op) {
  const tooBig = () =>
    new BigsegError(`${op}: HTTP ${res.status}: the answer is more than the ${MAX_RESPONSE_BYTES} bytes this store reads`, {
      kind: 'BAD_RESPONSE',
      status: res.status,
    });
  const length = res.headers.get('content-length');
  if (length !== null && Number(length) > MAX_RESPONSE_BYTES) {
    if (res.body) await res.body.cancel().catch(() => {});
    throw tooBig();
  }
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > MAX_RESPONSE_BYTES) {
      await reader.cancel().catch(() => {});
      throw tooBig();
    }
    chunks.push(value);
  }
  const all = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.byteLength;
  }
  return new TextDecoder().decode(all);
}

module.exports = {
  BigsegBigSegmentStore,
  BigsegError,
  DEFAULT_BASE_URL,
  DEFAULT_TIMEOUT_MS,
  MAX_RESPONSE_BYTES,
};
