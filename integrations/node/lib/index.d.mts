import type { interfaces, LDClientContext } from '@launchdarkly/node-server-sdk';

/** Options of {@link BigsegBigSegmentStore}. */
export interface BigsegOptions {
  /**
   * bigseg's address: http:// or https://, with a path if bigseg is served under one. The store
   * adds /memberships and /status. Default {@link DEFAULT_BASE_URL}.
   */
  baseUrl?: string;
  /**
   * The environment to read, of a bigseg serving several (BIGSEG_ENVIRONMENTS): the store then
   * asks /environments/{name}/memberships and /environments/{name}/status, which only that
   * environment's data answers. Lower-case letters, digits, `-` and `_`, starting with a letter
   * or digit, at most 63 characters, as bigseg's names; another throws a TypeError.
   * Surrounding white space is ignored. Default none (or ""): the unscoped routes, which a
   * bigseg serving one environment answers (that environment is also named `default`). bigseg
   * answers 404 (kind `HTTP`) for an environment it does not serve, and 403 for a bearer token
   * that does not open this one.
   */
  environment?: string;
  /**
   * Sent as `Authorization: Bearer <token>`, for a bigseg that requires one
   * (BIGSEG_API_TOKENS). Surrounding white space is ignored. Never appears in errors or logs.
   */
  bearerToken?: string;
  /**
   * Bound of each request, from sending it to reading the whole answer, in milliseconds.
   * Default {@link DEFAULT_TIMEOUT_MS}; zero or less means the default.
   */
  timeoutMs?: number;
  /**
   * The most segment refs one membership answer may list: an answer with more rejects with
   * kind `TOO_LARGE`, so the SDK caches nothing of it and that evaluation gets STORE_ERROR.
   * Default {@link DEFAULT_MAX_REFS}; zero or less means the default.
   */
  maxRefs?: number;
  /**
   * The most bytes of segment refs (their lengths added up, as UTF-8) one membership answer may
   * hold, as `maxRefs` bounds their number. Default {@link DEFAULT_MAX_REF_BYTES}; zero or less
   * means the default. The most of a response the store reads follows from both:
   * 6 × maxRefBytes + 9 × maxRefs + 4096 bytes.
   */
  maxRefBytes?: number;
}

/** Which way a call failed: see {@link BigsegError}. */
export type BigsegErrorKind = 'STORE_UNAVAILABLE' | 'HTTP' | 'BAD_RESPONSE' | 'TOO_LARGE' | 'TIMEOUT' | 'TRANSPORT' | 'CLOSED';

/**
 * The error of every store call that did not get a usable answer. Its message never holds the
 * bearer token.
 */
export declare class BigsegError extends Error {
  /**
   * `STORE_UNAVAILABLE`: bigseg says its store cannot be read (503 or 200 with status
   * STORE_ERROR, or /status with available false). `HTTP`: another status code (404 for an
   * environment bigseg does not serve, 403 for a token that does not open it). `BAD_RESPONSE`:
   * not bigseg's JSON, or not the answer asked for (another environment's status, or every
   * environment's without the environment option). `TOO_LARGE`: over the store's bounds
   * (maxRefs, maxRefBytes, or a body longer than any answer within them). `TIMEOUT`,
   * `TRANSPORT`: no answer. `CLOSED`: the store was closed.
   */
  readonly kind: BigsegErrorKind;
  /** The answer's status code, when there was an answer. */
  readonly status?: number;
  /** The Retry-After header of the answer (bigseg sends it with 429). */
  readonly retryAfter?: string;
}

/**
 * Returns the factory that the SDK's `bigSegments.store` option takes: a Big Segment store
 * that reads bigseg over HTTP (fetch). Throws a TypeError at once if the options are invalid.
 */
export declare function BigsegBigSegmentStore(
  options?: BigsegOptions,
): (clientContext: LDClientContext) => interfaces.BigSegmentStore;

/** http://localhost:8080: bigseg's default address. */
export declare const DEFAULT_BASE_URL: string;
/** 3000 ms. */
export declare const DEFAULT_TIMEOUT_MS: number;
/** 1000: the most segment refs one membership answer may list, by default. */
export declare const DEFAULT_MAX_REFS: number;
/** 65536: the most bytes of segment refs one membership answer may hold, by default. */
export declare const DEFAULT_MAX_REF_BYTES: number;
