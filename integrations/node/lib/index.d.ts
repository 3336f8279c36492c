import type { interfaces, LDClientContext } from '@launchdarkly/node-server-sdk';

/** Options of {@link BigsegBigSegmentStore}. */
export interface BigsegOptions {
  /**
   * bigseg's address: http:// or https://, with a path if bigseg is served under one. The store
   * adds /memberships and /status. Default {@link DEFAULT_BASE_URL}.
   */
  baseUrl?: string;
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
}

/** Which way a call failed: see {@link BigsegError}. */
export type BigsegErrorKind = 'STORE_UNAVAILABLE' | 'HTTP' | 'BAD_RESPONSE' | 'TIMEOUT' | 'TRANSPORT' | 'CLOSED';

/**
 * The error of every store call that did not get a usable answer. Its message never holds the
 * bearer token.
 */
export declare class BigsegError extends Error {
  /**
   * `STORE_UNAVAILABLE`: bigseg says its store cannot be read (503 or 200 with status
   * STORE_ERROR, or /status with available false). `HTTP`: another status code. `BAD_RESPONSE`:
   * not bigseg's JSON, or too large. `TIMEOUT`, `TRANSPORT`: no answer. `CLOSED`: the store
   * was closed.
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
/** 1 MiB: the most of an answer the store reads. */
export declare const MAX_RESPONSE_BYTES: number;
