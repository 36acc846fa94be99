/**
 * Errors the client throws. Every API error is an RFC 9457 problem (`application/problem+json`)
 * turned into one typed error per status, carrying the problem's fields and its field errors
 * (`errors`: field -> messages). The server never puts memory content in a problem, and neither do
 * these errors.
 */

import type { Memory } from "./models.js";

export const PROBLEM_TYPE_PREFIX = "urn:governed-memory:problem:";

/** What a problem body may hold; read tolerantly (a proxy's error page gives a minimal one). */
export type ProblemBody = { readonly [field: string]: unknown };

/** Base class of everything this package throws. */
export class GovernedMemoryError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * A value the client refuses before it sends anything: an id that is not a UUID (ids go into URL
 * paths), an idempotency key an HTTP header cannot carry, text that is not valid Unicode (a lone
 * surrogate), a missing URL or token. Nothing reached the server.
 */
export class InvalidArgument extends GovernedMemoryError {}

/**
 * The server could not be reached or stopped answering (after the retries an idempotent call
 * gets). `cause` is the underlying error from `fetch`.
 */
export class TransportError extends GovernedMemoryError {}

/** A successful status with a body this client cannot read (not JSON, or a field it needs is missing). */
export class UnexpectedResponse extends GovernedMemoryError {
  readonly status: number;

  constructor(message: string, status: number) {
    super(message);
    this.status = status;
  }
}

/**
 * The server refused the request with a problem. Nothing was written (a failed request writes
 * nothing). `code` is the problem type without its URN prefix, e.g. `stale_version`.
 */
export class APIError extends GovernedMemoryError {
  readonly problem: ProblemBody;
  readonly status: number;
  readonly type: string;
  readonly title: string;
  readonly detail: string;
  readonly instance: string;
  readonly errors: Record<string, string[]>;

  constructor(problem: ProblemBody, status: number) {
    const fields = {
      type: text(problem["type"]) || "about:blank",
      title: text(problem["title"]) || "Request failed",
      detail: text(problem["detail"]),
      instance: text(problem["instance"]),
      errors: fieldErrors(problem["errors"]),
    };
    super(problemMessage(status, fields.title, fields.detail, fields.errors));
    this.problem = { ...problem };
    this.status = status;
    this.type = fields.type;
    this.title = fields.title;
    this.detail = fields.detail;
    this.instance = fields.instance;
    this.errors = fields.errors;
  }

  get code(): string {
    return this.type.startsWith(PROBLEM_TYPE_PREFIX) ? this.type.slice(PROBLEM_TYPE_PREFIX.length) : this.type;
  }
}

/** 400 (and 413, 415): the body is invalid. `errors` names every field and what is wrong. */
export class ValidationError extends APIError {}

/** 401: missing, unknown or revoked token. */
export class AuthenticationError extends APIError {}

/**
 * 403: outside what the token allows (a purpose it lacks, operator authority without the
 * capability, forgetting or confirming without it, a reviewer-only action).
 */
export class ScopeDenied extends APIError {}

/** 404: no such record (or forget request) in your scope. */
export class NotFound extends APIError {}

/**
 * 409: a stale `expectedVersion` or `supersedesVersion`, a transition that does not apply to the
 * record's status, or an idempotency key reused with another body. For a call about one record
 * (confirm, or a write that supersedes one) the client reads the record back: `current` is it as
 * it is now and `currentVersion` its version, so the caller can decide again and retry with it.
 */
export class Conflict extends APIError {
  currentVersion: number | null;
  current: Memory | null = null;

  constructor(problem: ProblemBody, status: number) {
    super(problem, status);
    const version = problem["current_version"];
    this.currentVersion = Number.isInteger(version) ? (version as number) : null;
  }

  /** @internal The record as it is now, read back by the client after the 409. */
  attachCurrent(record: Memory): void {
    this.current = record;
    if (this.currentVersion === null) this.currentVersion = record.version;
    this.message += `\n  current version: ${this.currentVersion} (status ${record.status})`;
  }
}

/**
 * 429, after the retries the client's policy allows. `retryAfter` is the server's `Retry-After`
 * in seconds (null if it sent none).
 */
export class RateLimited extends APIError {
  readonly retryAfter: number | null;

  constructor(problem: ProblemBody, status: number, retryAfter: number | null = null) {
    super(problem, status);
    this.retryAfter = retryAfter;
  }
}

/** 5xx: the server failed; the problem says nothing about the cause. */
export class ServerError extends APIError {}

const BY_STATUS: Record<number, new (problem: ProblemBody, status: number) => APIError> = {
  400: ValidationError,
  413: ValidationError,
  415: ValidationError,
  401: AuthenticationError,
  403: ScopeDenied,
  404: NotFound,
  409: Conflict,
};

/** The typed error for a problem with this status. */
export function errorFromProblem(status: number, problem: ProblemBody, retryAfter: number | null = null): APIError {
  if (status === 429) return new RateLimited(problem, status, retryAfter);
  if (status >= 500) return new ServerError(problem, status);
  const ErrorClass = BY_STATUS[status] ?? APIError;
  return new ErrorClass(problem, status);
}

function problemMessage(status: number, title: string, detail: string, errors: Record<string, string[]>): string {
  let message = `${status} ${title}`;
  if (detail) message += `: ${detail}`;
  for (const [field, messages] of Object.entries(errors)) message += `\n  ${field}: ${messages.join(" ")}`;
  return message;
}

function text(value: unknown): string {
  return value === undefined || value === null ? "" : String(value);
}

function fieldErrors(value: unknown): Record<string, string[]> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return {};
  const errors: Record<string, string[]> = {};
  for (const [field, messages] of Object.entries(value)) {
    errors[field] = Array.isArray(messages) ? messages.map(String) : [String(messages)];
  }
  return errors;
}
