/**
 * What the client needs besides I/O: the retry policy, how ids, idempotency keys and bodies are
 * checked before anything is sent, and how a `Retry-After` header reads.
 *
 * Nothing a caller passes can change which endpoint a call reaches: ids are checked to be UUIDs
 * (the API's ids) and percent-encoded before they enter a URL path, the idempotency key must be
 * something an HTTP header can carry, and a body holding text that is not Unicode (a lone
 * surrogate) is refused as `InvalidArgument` before anything is sent.
 */

import { InvalidArgument } from "./errors.js";

export const URL_ENV = "GOVERNED_MEMORY_URL";
export const TOKEN_ENV = "GOVERNED_MEMORY_TOKEN";
export const API_PREFIX = "/api/v1/";
/** The server's limit per batch request; longer lists are sent in chunks. */
export const BATCH_MAX_ITEMS = 100;
export const IDEMPOTENCY_KEY_MAX_CHARS = 200;
export const RETRYABLE_GATEWAY_STATUSES: ReadonlySet<number> = new Set([502, 503, 504]);

/**
 * `attempts` counts the first try. Backoff after a connection error or a gateway error without
 * `Retry-After`: `backoffSeconds`, doubling, at most `maxBackoffSeconds`, with jitter. A 429 waits
 * exactly what `Retry-After` says, unless that is longer than `maxRetryAfterSeconds`: then the call
 * throws `RateLimited` at once rather than block.
 */
export interface RetryPolicy {
  readonly attempts: number;
  readonly backoffSeconds: number;
  readonly maxBackoffSeconds: number;
  readonly maxRetryAfterSeconds: number;
}

export const DEFAULT_RETRY: RetryPolicy = Object.freeze({
  attempts: 4,
  backoffSeconds: 0.5,
  maxBackoffSeconds: 8,
  maxRetryAfterSeconds: 60,
});

/** No retries at all: every call is sent once. */
export const NO_RETRY: RetryPolicy = Object.freeze({ ...DEFAULT_RETRY, attempts: 1 });

export function backoffDelay(policy: RetryPolicy, attempt: number): number {
  const delay = Math.min(policy.maxBackoffSeconds, policy.backoffSeconds * 2 ** (attempt - 1));
  return delay * (0.5 + Math.random() * 0.5);
}

const UUID = /^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$/;
export const UUID_RULE = "must be a UUID such as 6f1c2b7e-0c4a-4d8e-9b1a-2f3c4d5e6f70, as the service returns it";
// Visible ASCII: what an HTTP header carries unchanged (no line break to split it, no space to trim).
const IDEMPOTENCY_KEY = new RegExp(`^[!-~]{1,${IDEMPOTENCY_KEY_MAX_CHARS}}$`);
export const IDEMPOTENCY_KEY_RULE =
  `must be 1 to ${IDEMPOTENCY_KEY_MAX_CHARS} visible ASCII characters (letters, digits and punctuation; no spaces)`;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** The base URL and token: given, else from GOVERNED_MEMORY_URL and GOVERNED_MEMORY_TOKEN. */
export function settingsFromEnv(baseUrl: string | undefined, token: string | undefined): [string, string] {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env ?? {};
  const url = baseUrl || env[URL_ENV];
  const secret = token || env[TOKEN_ENV];
  if (!url) throw new InvalidArgument(`No server URL: pass baseUrl or set ${URL_ENV} (e.g. http://127.0.0.1:8000).`);
  if (!secret) throw new InvalidArgument(`No token: pass token or set ${TOKEN_ENV} (an agent token, gma_...).`);
  return [apiBase(url), secret];
}

/**
 * The API root for a server URL: `http://host:8000` and `http://host:8000/api/v1` both give
 * `http://host:8000/api/v1/`.
 */
export function apiBase(baseUrl: string): string {
  let base = baseUrl.replace(/\/+$/, "");
  const prefix = API_PREFIX.replace(/\/$/, "");
  if (!base.endsWith(prefix)) base += prefix;
  try {
    return new URL(`${base}/`).toString();
  } catch {
    throw new InvalidArgument(`The server URL is not a URL: ${JSON.stringify(baseUrl)}.`);
  }
}

export function newIdempotencyKey(): string {
  return `gmc-${globalThis.crypto.randomUUID().replaceAll("-", "")}`;
}

/** A caller's key goes into a header: anything but 1 to 200 visible ASCII characters is refused. */
export function checkedIdempotencyKey(key: unknown): string {
  if (typeof key !== "string" || !IDEMPOTENCY_KEY.test(key)) {
    throw new InvalidArgument(`idempotencyKey ${IDEMPOTENCY_KEY_RULE}.`);
  }
  return key;
}

/**
 * An id in its canonical form, or `InvalidArgument`: the API's ids are UUIDs, so nothing else is
 * worth sending, and an id such as `../forget/` must never become part of a URL.
 */
export function uuidId(value: unknown, what: string): string {
  if (typeof value !== "string" || !UUID.test(value)) throw new InvalidArgument(`${what} ${UUID_RULE}.`);
  const hex = value.replaceAll("-", "").toLowerCase();
  return [hex.slice(0, 8), hex.slice(8, 12), hex.slice(12, 16), hex.slice(16, 20), hex.slice(20)].join("-");
}

/** A path under /api/v1/, each segment percent-encoded: no value can add a segment or a query. */
export function apiPath(...segments: string[]): string {
  return segments.map((segment) => `${encodeURIComponent(segment)}/`).join("");
}

/** Refuses a body holding text that is not valid Unicode, before anything is sent. */
export function checkUnicode(value: unknown, where: string): void {
  if (typeof value === "string") {
    if (LONE_SURROGATE.test(value)) {
      throw new InvalidArgument(`${where} was not sent: a text value is not valid Unicode (it holds a lone surrogate).`);
    }
  } else if (Array.isArray(value)) {
    for (const item of value) checkUnicode(item, where);
  } else if (typeof value === "object" && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      checkUnicode(key, where);
      checkUnicode(item, where);
    }
  }
}

/** `Retry-After` as seconds: delta-seconds, or an HTTP date; null when absent or unreadable. */
export function parseRetryAfter(value: string | null): number | null {
  if (!value) return null;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const when = Date.parse(trimmed);
  if (Number.isNaN(when)) return null;
  return Math.max(0, (when - Date.now()) / 1000);
}

export function sleep(seconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, seconds * 1000));
}
