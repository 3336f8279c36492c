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
 * at each status poll (one GET /status, which bigseg answers from its own last poll); with the
 * environment option, those of one environment of a bigseg serving several
 * (/environments/{name}/memberships and /environments/{name}/status). Every
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

/**
 * The most segment refs one membership answer may list unless maxRefs says otherwise.
 *
 * The SDK caches every answer (1000 contexts by default), so what one answer may hold, times
 * the cache size, is what a broken, compromised or misconfigured bigseg can make the SDK's
 * process keep: unbounded, maps of a megabyte per context took an SDK to 3 GiB of heap. A
 * context is listed in at most hundreds of Big Segments in practice (one ref per segment whose
 * included or excluded list names it), so 1000 leaves room without letting an answer be large.
 */
const DEFAULT_MAX_REFS = 1000;

/**
 * The most bytes of segment refs (their lengths added up, as UTF-8) one membership answer may
 * hold unless maxRefBytes says otherwise. A LaunchDarkly segment ref is the segment's key and
 * its generation ("beta-users.g3"), keys being short identifiers: 64 KiB is 1000 refs of 64
 * bytes on average, or a few hundred with keys of a few hundred bytes.
 */
const DEFAULT_MAX_REF_BYTES = 64 * 1024;

/** Room for the rest of a lookup answer around its memberships (hash, status, error, fields added later). */
const ENVELOPE_BYTES = 4096;

/**
 * The most of a response the store reads: the longest JSON of a lookup answer within the
 * bounds, each ref byte escaped (\u00XX: 6 bytes) and each ref with its punctuation
 * (`"":false,`: 9 bytes), and the envelope; 406312 bytes with the defaults.
 */
function maxBodyBytes(maxRefs, maxRefBytes) {
  return 6 * maxRefBytes + 9 * maxRefs + ENVELOPE_BYTES;
}

const MAX_MESSAGE_CHARS = 200;
const OP_MEMBERSHIP = 'bigseg membership';
const OP_STATUS = 'bigseg status';

/**
 * The error of every call that did not get a usable answer. `kind` says which way it failed:
 *
 * - `STORE_UNAVAILABLE`: bigseg says its store cannot be read (a 503 with status STORE_ERROR, a
 *   200 lookup with status STORE_ERROR, or /status with "available": false);
 * - `HTTP`: another status code (`status`, and `retryAfter` for a 429); bigseg answers 404 for
 *   an environment it does not serve (or, while it serves several, a lookup naming none), and
 *   403 for a bearer token that does not open the environment;
 * - `BAD_RESPONSE`: a 200 that is not bigseg's JSON, or not the answer asked for (another
 *   environment's status; every environment's, when the environment option is not set);
 * - `TOO_LARGE`: an answer over the store's bounds: more segment refs than maxRefs, more bytes of
 *   refs than maxRefBytes, or a body longer than any answer within them can be;
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
  403: 'forbidden: a bearer token scoped to some environments needs the environment option set to one of them',
  404: "no such route: is the base URL bigseg's? One serving several environments needs the environment option set",
  429: 'too many requests: a rate limit in front of bigseg, most likely',
};

/** The hints of a store with the environment option: what bigseg's 403 and 404 then mean. */
const ENVIRONMENT_HINTS = {
  403: (env) => `the bearer token does not open environment "${env}"`,
  404: (env) => `bigseg does not serve environment "${env}", or the base URL is not bigseg's`,
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

/**
 * What bigseg accepts as an environment's name (BIGSEG_ENVIRONMENTS): safe in a path as it is,
 * so the store never escapes it.
 */
const ENVIRONMENT_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/;

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

  let environment = opts.environment === undefined || opts.environment === null ? '' : opts.environment;
  if (typeof environment !== 'string') {
    throw new TypeError('bigseg environment: must be a string');
  }
  environment = environment.trim();
  if (environment && !ENVIRONMENT_PATTERN.test(environment)) {
    const quoted = JSON.stringify(environment.length > 70 ? `${environment.slice(0, 64)}...` : environment);
    throw new TypeError(
      `bigseg environment: ${quoted} is not an environment name: lower-case letters, digits, - and _, starting with a letter or digit, at most 63 characters (as in BIGSEG_ENVIRONMENTS)`,
    );
  }
  const routes = environment ? `${base}/environments/${environment}` : base;

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

  const maxRefs = boundOption(opts.maxRefs, 'maxRefs', DEFAULT_MAX_REFS);
  const maxRefBytes = boundOption(opts.maxRefBytes, 'maxRefBytes', DEFAULT_MAX_REF_BYTES);

  const headers = { accept: 'application/json', 'user-agent': 'ldbigseg-node' };
  if (token) headers.authorization = `Bearer ${token}`;
  return {
    base,
    environment,
    host: url.host,
    plainHttpOffHost: url.protocol === 'http:' && !isLoopback(url.hostname),
    membershipUrl: `${routes}/memberships?contextHash=`,
    statusUrl: `${routes}/status`,
    token,
    headers,
    timeoutMs,
    maxRefs,
    maxRefBytes,
    maxBodyBytes: maxBodyBytes(maxRefs, maxRefBytes),
  };
}

/** A bound option: a whole number; absent, zero or less means the default (never unbounded). */
function boundOption(value, name, defaultValue) {
  if (value === undefined || value === null) return defaultValue;
  if (typeof value !== 'number' || !Number.isSafeInteger(value)) {
    throw new TypeError(`bigseg ${name}: must be a whole number`);
  }
  return value <= 0 ? defaultValue : value;
}

function isLoopback(hostname) {
  return hostname === 'localhost' || hostname === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(hostname);
}

/**
 * Returns the factory that the SDK's `bigSegments.store` option takes.
 *
 * @param {{ baseUrl?: string, environment?: string, bearerToken?: string, timeoutMs?: number, maxRefs?: number, maxRefBytes?: number }} [options]
 *   `baseUrl`: bigseg's address, with a path if it is served under one (default
 *   http://localhost:8080). `environment`: the environment to read, of a bigseg serving several
 *   (BIGSEG_ENVIRONMENTS): the store then uses the routes under /environments/{name}/ (default
 *   none: the unscoped routes). `bearerToken`: sent as `Authorization: Bearer ...` when bigseg
 *   requires one (BIGSEG_API_TOKENS). `timeoutMs`: bound of each request (default 3000; zero or
 *   less means the default). `maxRefs`, `maxRefBytes`: the most segment refs, and bytes of
 *   refs, one membership answer may hold (default 1000 and 65536; zero or less means the
 *   default); an answer over them rejects with kind TOO_LARGE, and nothing of it is kept.
 */
function BigsegBigSegmentStore(options) {
  const settings = resolveOptions(options); // fails at configuration, not at the first evaluation
  return (clientContext) => {
    const logger = clientContext && clientContext.basicConfiguration && clientContext.basicConfiguration.logger;
    if (logger) {
      logger.info(`Big Segment store: bigseg at ${settings.base}${settings.environment ? `, environment ${settings.environment}` : ''}`);
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

  /**
   * GET /status: lastSynchronizedOn as lastUpToDate (absent when never synchronized). A bigseg
   * serving several environments answers the unscoped /status with every environment's: that
   * rejects, saying to set the environment option.
   */
  async getMetadata() {
    const a = await this._get(OP_STATUS, this._s.statusUrl);
    if (a.status !== 200) throw this._httpError(OP_STATUS, a);
    const body = this._parse(OP_STATUS, a);
    const env = this._s.environment;
    if (body !== null && typeof body === 'object' && body.available === undefined && isObject(body.environments)) {
      const names = cleanMessage(Object.keys(body.environments).sort().join(', '), this._s.token);
      throw new BigsegError(`${OP_STATUS}: bigseg serves several environments (${names}): set the store's environment option to one of them`, {
        kind: 'BAD_RESPONSE',
        status: 200,
      });
    }
    if (env && body !== null && typeof body === 'object' && body.environment !== undefined && body.environment !== env) {
      throw this._badResponse(OP_STATUS, a, `the answer is for environment ${JSON.stringify(cleanMessage(body.environment, this._s.token))}, not "${env}"`);
    }
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
   * excluded), or undefined when there are none. An answer over maxRefs or maxRefBytes
   * rejects (TOO_LARGE) before anything of it is returned, so the SDK caches nothing of it;
   * while it is read, the body is bounded by maxBodyBytes, which follows from both.
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
    const { maxRefs, maxRefBytes } = this._s;
    const over = scanBounds(a.text, maxRefs, maxRefBytes); // before JSON.parse builds any of it
    if (over) throw tooLarge(OP_MEMBERSHIP, a.status, over);
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
    // The bounds again, on what JSON.parse made: what scanBounds may have left to it.
    const refs = Object.keys(m);
    if (refs.length > maxRefs) throw tooLarge(OP_MEMBERSHIP, a.status, overRefs(maxRefs));
    let bytes = 0;
    for (const ref of refs) {
      if ((bytes += utf8Length(ref)) > maxRefBytes) throw tooLarge(OP_MEMBERSHIP, a.status, overRefBytes(maxRefBytes));
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

  /** One GET, read in full: bounded in time by timeoutMs and in size by maxBodyBytes. */
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
      const text = await readBounded(res, op, this._s.maxBodyBytes);
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
    const env = this._s.environment;
    let hint = env && ENVIRONMENT_HINTS[status] ? ENVIRONMENT_HINTS[status](env) : STATUS_HINTS[status];
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

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

const overRefs = (max) => `more than ${max} segment refs (maxRefs)`;
const overRefBytes = (max) => `more than ${max} bytes of segment refs (maxRefBytes)`;

/**
 * Scans the JSON of a lookup answer for its "memberships", counting their refs and the refs'
 * bytes against the bounds without making strings or objects of the rest: it returns which
 * bound is exceeded at the first ref over one, else undefined. So an answer over the bounds is
 * rejected before JSON.parse builds it (a map of 30,000 refs costs JSON.parse about 20 ms).
 * It only follows the structure, and returns undefined wherever the text is not JSON, leaving
 * that to JSON.parse; the count on what JSON.parse makes is the guarantee.
 */
function scanBounds(t, maxRefs, maxRefBytes) {
  let i = skipSpace(t, 0);
  if (t[i] !== '{') return undefined;
  for (i = skipSpace(t, i + 1); t[i] === '"'; i = skipSpace(t, i + 1)) {
    let end = stringEnd(t, i);
    if (end < 0) return undefined;
    const name = unquote(t, i, end);
    if (t[(i = skipSpace(t, end))] !== ':') return undefined;
    i = skipSpace(t, i + 1);
    if (name === 'memberships' && t[i] === '{') {
      let refs = 0;
      let bytes = 0;
      for (i = skipSpace(t, i + 1); t[i] === '"'; i = skipSpace(t, i + 1)) {
        if (++refs > maxRefs) return overRefs(maxRefs);
        if ((end = stringEnd(t, i)) < 0) return undefined;
        if ((bytes += utf8Length(unquote(t, i, end))) > maxRefBytes) return overRefBytes(maxRefBytes);
        if (t[(i = skipSpace(t, end))] !== ':') return undefined;
        if ((i = skipValue(t, skipSpace(t, i + 1))) < 0) return undefined;
        if (t[(i = skipSpace(t, i))] !== ',') break;
      }
      if (t[i] !== '}') return undefined;
      i++;
    } else if ((i = skipValue(t, i)) < 0) {
      return undefined;
    }
    if (t[(i = skipSpace(t, i))] !== ',') return undefined;
  }
  return undefined;
}

function skipSpace(t, i) {
  while (t[i] === ' ' || t[i] === '\t' || t[i] === '\n' || t[i] === '\r') i++;
  return i;
}

/** The index just after the JSON string that starts at i, or -1. */
function stringEnd(t, i) {
  for (let j = i + 1; j < t.length; j++) {
    const c = t.charCodeAt(j);
    if (c === 0x5c) j++;
    else if (c === 0x22) return j + 1;
  }
  return -1;
}

/** The value of the JSON string t[i:end] (as it is, if JSON.parse cannot decode it). */
function unquote(t, i, end) {
  const raw = t.slice(i + 1, end - 1);
  if (!raw.includes('\\')) return raw;
  try {
    return JSON.parse(t.slice(i, end));
  } catch {
    return raw;
  }
}

/** The index just after the JSON value that starts at i, or -1; only its structure is followed. */
function skipValue(t, i) {
  if (t[i] === '"') return stringEnd(t, i);
  if (t[i] === '{' || t[i] === '[') {
    for (let depth = 0; i < t.length; i++) {
      const c = t[i];
      if (c === '"') {
        if ((i = stringEnd(t, i)) < 0) return -1;
        i--;
      } else if (c === '{' || c === '[') depth++;
      else if ((c === '}' || c === ']') && --depth === 0) return i + 1;
    }
    return -1;
  }
  while (i < t.length && !',}] \t\n\r'.includes(t[i])) i++; // a number, true, false or null
  return i;
}

/** The error of an answer over the store's bounds. */
function tooLarge(op, status, what) {
  return new BigsegError(`${op}: HTTP ${status}: the answer is over the store's bounds: ${what}`, { kind: 'TOO_LARGE', status });
}

/** The bytes of a string in UTF-8 (a lone surrogate counts as U+FFFD, as TextEncoder makes it). */
function utf8Length(s) {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c < 0xdc00 && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 4; // a surrogate pair
      i++;
    } else n += 3;
  }
  return n;
}

/** Reads a response body as text, failing once it passes max bytes, and keeping none of it then. */
async function readBounded(res, op, max) {
  const length = res.headers.get('content-length');
  if (length !== null && Number(length) > max) {
    if (res.body) await res.body.cancel().catch(() => {});
    throw tooLarge(op, res.status, `${length} bytes, more than the ${max} bytes this store reads`);
  }
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > max) {
      await reader.cancel().catch(() => {});
      throw tooLarge(op, res.status, `more than the ${max} bytes this store reads`);
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
  DEFAULT_MAX_REFS,
  DEFAULT_MAX_REF_BYTES,
};
