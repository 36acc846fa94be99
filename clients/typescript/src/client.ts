/**
 * `Client` for the governed memory API, on the platform's `fetch`.
 *
 * Retries: a 429 is retried after the server's `Retry-After` for every call (a limited request
 * was not processed). A connection error, a timeout, or a 502/503/504 from a proxy is retried only
 * for idempotent calls: reads (get, list, recall, forget status) and writes, which always carry an
 * idempotency key, reused on every attempt, so the server stores them once. `confirm` (a
 * compare-and-swap) and `forget` are never retried after the request may have reached the server.
 */

import type { components, operations } from "./api-types.js";
import * as core from "./core.js";
import { Conflict, errorFromProblem, GovernedMemoryError, InvalidArgument, type ProblemBody, TransportError, UnexpectedResponse } from "./errors.js";
import {
  type BatchItemResult,
  BatchResult,
  type ForgetRequest,
  type Memory,
  readBatch,
  readForgetRequest,
  readMemory,
  readRecall,
  type RecallResult,
} from "./models.js";
import { type Authority, type DateInput, isoOrNull, Provenance } from "./provenance.js";
import { VERSION } from "./version.js";

type Schemas = components["schemas"];
type WriteBody = Omit<Schemas["MemoryWriteRequest"], "provenance"> & { provenance: ReturnType<Provenance["toJSON"]> };
type ListQuery = NonNullable<operations["v1_memories_list"]["parameters"]["query"]>;

/** A memory, or its id (a UUID). */
export type MemoryRef = string | Pick<Memory, "id">;

export interface ClientOptions {
  /** The server, e.g. `http://127.0.0.1:8000` (or its `/api/v1`). Default: `GOVERNED_MEMORY_URL`. */
  baseUrl?: string;
  /** An agent token (`gma_...`). Default: `GOVERNED_MEMORY_TOKEN`. */
  token?: string;
  /** Per attempt. Default: 30 seconds. */
  timeoutSeconds?: number;
  /** The retry policy (`NO_RETRY` turns retries off); fields left out keep their defaults. */
  retry?: Partial<core.RetryPolicy>;
  /** The `fetch` to send requests with. Default: the platform's. */
  fetch?: typeof fetch;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
}

/** What one write says besides its content. */
export interface RememberOptions {
  subject: string;
  purpose: string;
  kind: string;
  provenance: Provenance;
  /** The writer's confidence in [0, 1]; never verification. */
  confidence: number;
  /** Default: the provenance's `defaultAuthority`. Pass one only to claim less. */
  authority?: Authority;
  /** Give `ttlSeconds` or `expiresAt` (neither: the kind's default TTL). */
  ttlSeconds?: number;
  expiresAt?: DateInput;
  validFrom?: DateInput;
  validTo?: DateInput;
  /** A correction names the record it replaces; a Memory also gives its version. */
  supersedes?: MemoryRef;
  supersedesVersion?: number;
  /** Source records of a summary or merge (always reviewed). */
  derivedFrom?: MemoryRef[];
  /**
   * Default: one made for this call and reused on every retry of it. Give your own (e.g.
   * "s-1-turn-12") to make a write safe to repeat across processes.
   */
  idempotencyKey?: string;
}

/** One item of `rememberMany`. */
export interface MemoryDraft extends RememberOptions {
  content: string;
}

export interface RecallOptions {
  purpose: string;
  subject?: string;
  kinds?: string[];
  limit?: number;
  /** Fill at most this many (estimated) tokens, in rank order. */
  tokenBudget?: number;
  /** Leave out items whose relevance is under this (0 to 1; default: the server's floor). */
  minRelevance?: number;
}

export interface ListOptions {
  status?: ListQuery["status"];
  kind?: string;
  subject?: string;
  purpose?: string;
  authority?: ListQuery["authority"];
  trust?: ListQuery["trust"];
  sourceType?: ListQuery["source_type"];
  createdAfter?: DateInput;
  createdBefore?: DateInput;
  /** `"created_at"` gives an order that new writes do not shift while you page. */
  ordering?: NonNullable<ListQuery["ordering"]>[number] | NonNullable<ListQuery["ordering"]>;
  /** Default: 100. */
  pageSize?: number;
  /** Other query parameters, as the API names them. */
  filters?: Record<string, string>;
}

interface Call<T> {
  method: "GET" | "POST";
  path: string; // relative to /api/v1/, query included
  read: (body: unknown, response: Response) => T;
  body?: unknown;
  headers?: Record<string, string>;
  idempotent: boolean;
  conflictRecord?: string; // a 409 reads this record back (Conflict.current)
}

/**
 * A client of the governed memory API. `baseUrl` and `token` default to the environment
 * (GOVERNED_MEMORY_URL, GOVERNED_MEMORY_TOKEN).
 */
export class Client {
  readonly baseUrl: string;
  readonly retryPolicy: core.RetryPolicy;
  readonly #token: string;
  readonly #timeoutSeconds: number;
  readonly #fetch: typeof fetch;
  readonly #headers: Record<string, string>;

  constructor(options: ClientOptions = {}) {
    [this.baseUrl, this.#token] = core.settingsFromEnv(options.baseUrl, options.token);
    this.retryPolicy = Object.freeze({ ...core.DEFAULT_RETRY, ...options.retry });
    this.#timeoutSeconds = options.timeoutSeconds ?? 30;
    this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.#headers = options.headers ?? {};
  }

  // ----------------------------------------------------------------------------------------------
  // writes

  /**
   * Write one memory: a distilled claim with its source. `authority` defaults to the one the
   * provenance's source carries (`Provenance.userTurn` -> user, `webPage` -> third party, ...).
   * Returns the record: `active`, or `quarantined` (`awaitingReview`) until a human reviewer
   * promotes it. To correct a record, pass it as `supersedes` (its version is taken from it). The
   * write carries an idempotency key (yours, or one made for this call) that every retry reuses,
   * so it is stored once.
   */
  async remember(content: string, options: RememberOptions): Promise<Memory> {
    const body = writeBody({ ...options, content });
    const key = options.idempotencyKey === undefined ? core.newIdempotencyKey() : core.checkedIdempotencyKey(options.idempotencyKey);
    const call: Call<Memory> = {
      method: "POST",
      path: "memories/",
      read: readRecord,
      body,
      headers: { "Idempotency-Key": key },
      idempotent: true,
    };
    if (body.supersedes) call.conflictRecord = body.supersedes;
    return this.#send(call);
  }

  /**
   * Write many memories through the batch endpoint (in chunks of 100). Each draft is validated,
   * admitted or quarantined exactly as a single write; one that fails is that item's `error` in
   * the result, not a thrown error. Every item carries an idempotency key, made once, so a retried
   * chunk writes nothing twice.
   */
  async rememberMany(drafts: Iterable<MemoryDraft>): Promise<BatchResult> {
    const all = [...drafts];
    const items = all.map((draft) => ({
      ...writeBody(draft),
      idempotency_key:
        draft.idempotencyKey === undefined ? core.newIdempotencyKey() : core.checkedIdempotencyKey(draft.idempotencyKey),
    }));
    const results: BatchItemResult[] = [];
    for (let offset = 0; offset < items.length; offset += core.BATCH_MAX_ITEMS) {
      const chunk = items.slice(offset, offset + core.BATCH_MAX_ITEMS);
      results.push(
        ...(await this.#send({
          method: "POST",
          path: "memories/batch/",
          read: (body, response) => readBatch(body, offset, response.status),
          body: { items: chunk },
          idempotent: true,
        })),
      );
    }
    return new BatchResult(results);
  }

  /**
   * Say the memory was re-checked against its source (tokens with the confirm capability).
   * `expectedVersion` is the version you checked (taken from a Memory if you pass one); a stale
   * one throws `Conflict` with the record's `currentVersion` and `current`.
   */
  async confirm(memory: MemoryRef, options: { expectedVersion?: number; note?: string } = {}): Promise<Memory> {
    let expectedVersion = options.expectedVersion;
    if (expectedVersion === undefined) {
      if (typeof memory === "string" || typeof (memory as Partial<Memory>).version !== "number") {
        throw new InvalidArgument("confirm() needs expectedVersion (or pass the Memory you looked at).");
      }
      expectedVersion = (memory as Memory).version;
    }
    const id = recordId(memory);
    const body: Schemas["TransitionRequest"] = { expected_version: expectedVersion, note: options.note ?? "" };
    return this.#send({
      method: "POST",
      path: core.apiPath("memories", id, "confirm"),
      read: readRecord,
      body,
      idempotent: false,
      conflictRecord: id,
    });
  }

  /**
   * Forget every memory about `subject` (tokens with the forget capability). Recall stops
   * returning them before this returns; `forgetStatus` follows the propagation.
   */
  async forget(subject: string, options: { reason?: string } = {}): Promise<ForgetRequest> {
    const body: Schemas["ForgetRequestInputRequest"] = { subject, reason: options.reason ?? "" };
    return this.#send({ method: "POST", path: "forget/", read: readForgetRequest, body, idempotent: false });
  }

  // ----------------------------------------------------------------------------------------------
  // reads

  /**
   * Active, unexpired memories for a task, best first, within `tokenBudget`, each at least
   * `minRelevance` relevant. No items means nothing relevant was found (`below_floor` counts what
   * fell under the floor). `toPrompt()` renders them as one block of dated, sourced lines.
   */
  async recall(query: string, options: RecallOptions): Promise<RecallResult> {
    const body: Partial<Schemas["RecallQueryRequest"]> = { query, purpose: options.purpose };
    if (options.subject !== undefined) body.subject = options.subject;
    if (options.kinds !== undefined) body.kinds = [...options.kinds];
    if (options.limit !== undefined) body.limit = options.limit;
    if (options.tokenBudget !== undefined) body.token_budget = options.tokenBudget;
    if (options.minRelevance !== undefined) body.min_relevance = options.minRelevance;
    return this.#send({ method: "POST", path: "recall/", read: readRecall, body, idempotent: true });
  }

  /** One memory by id (a UUID; anything else throws `InvalidArgument` without a request). */
  async get(memory: MemoryRef): Promise<Memory> {
    return this.#send(getCall(recordId(memory)));
  }

  /** A forget request as it is now: `propagating`, then `completed` with its receipts. */
  async forgetStatus(request: string | Pick<ForgetRequest, "id">): Promise<ForgetRequest> {
    const id = core.uuidId(typeof request === "string" ? request : request.id, "A forget request id");
    return this.#send({ method: "GET", path: core.apiPath("forget", id), read: readForgetRequest, idempotent: true });
  }

  /**
   * Every memory in scope matching the filters, fetching a page at a time as you iterate:
   * `for await (const memory of client.list({ subject }))`.
   */
  async *list(options: ListOptions = {}): AsyncGenerator<Memory, void, undefined> {
    let query: string | null = listQuery(options);
    while (query !== null) {
      const page: Page = await this.#send({ method: "GET", path: `memories/?${query}`, read: readPage, idempotent: true });
      yield* page.memories;
      query = page.next;
    }
  }

  // ----------------------------------------------------------------------------------------------

  async #send<T>(call: Call<T>): Promise<T> {
    const url = new URL(call.path, this.baseUrl).toString();
    const headers: Record<string, string> = {
      Authorization: `Bearer ${this.#token}`,
      Accept: "application/json, application/problem+json",
      "User-Agent": `governed-memory-client-typescript/${VERSION}`,
      ...this.#headers,
      ...call.headers,
    };
    let body: string | undefined;
    if (call.body !== undefined) {
      core.checkUnicode(call.body, `${call.method} ${call.path}`);
      body = JSON.stringify(call.body);
      headers["Content-Type"] = "application/json";
    }
    const policy = this.retryPolicy;
    for (let attempt = 1; ; attempt++) {
      let response: Response;
      let text: string;
      try {
        response = await this.#fetch(url, {
          method: call.method,
          headers,
          body,
          redirect: "manual",
          signal: AbortSignal.timeout(this.#timeoutSeconds * 1000),
        });
        text = await response.text();
      } catch (error) {
        if (call.idempotent && attempt < policy.attempts) {
          await core.sleep(core.backoffDelay(policy, attempt));
          continue;
        }
        const tries = attempt > 1 ? ` after ${attempt} attempts` : "";
        throw new TransportError(`${call.method} ${url} failed${tries}: ${describe(error)}`, { cause: error });
      }
      const status = response.status;
      if (status >= 200 && status < 300) return call.read(jsonBody(text, status), response);
      const retryAfter = core.parseRetryAfter(response.headers.get("Retry-After"));
      const canRetry = attempt < policy.attempts;
      if (status === 429 && canRetry && (retryAfter === null || retryAfter <= policy.maxRetryAfterSeconds)) {
        await core.sleep(retryAfter ?? core.backoffDelay(policy, attempt));
        continue;
      }
      if (core.RETRYABLE_GATEWAY_STATUSES.has(status) && call.idempotent && canRetry) {
        await core.sleep(
          retryAfter === null ? core.backoffDelay(policy, attempt) : Math.min(retryAfter, policy.maxRetryAfterSeconds),
        );
        continue;
      }
      const error = errorFromProblem(status, problemBody(text, response, url), retryAfter);
      if (error instanceof Conflict && call.conflictRecord) {
        try {
          error.attachCurrent(await this.#send(getCall(call.conflictRecord)));
        } catch (readBack) {
          if (!(readBack instanceof GovernedMemoryError)) throw readBack; // the conflict is the answer
        }
      }
      throw error;
    }
  }
}

// ------------------------------------------------------------------------------------------------

function getCall(id: string): Call<Memory> {
  return { method: "GET", path: core.apiPath("memories", id), read: readRecord, idempotent: true };
}

function readRecord(body: unknown, response: Response): Memory {
  return readMemory(body, response.headers.get("Idempotent-Replayed") === "true");
}

interface Page {
  memories: Memory[];
  next: string | null; // the query of the next page, null after the last
}

function readPage(body: unknown): Page {
  const page = body as { results?: unknown; next?: unknown } | null;
  if (typeof page !== "object" || page === null || !Array.isArray(page.results)) {
    throw new UnexpectedResponse("The list answer has no results.", 200);
  }
  // Follow the next page by its query only: the host in `next` is what the server saw, which
  // behind a proxy need not be the address this client uses.
  let next: string | null = null;
  if (typeof page.next === "string" && page.next) {
    try {
      next = new URL(page.next).search.replace(/^\?/, "");
    } catch {
      throw new UnexpectedResponse("The list answer's next page is not a URL.", 200);
    }
  }
  return { memories: page.results.map((record) => readMemory(record)), next };
}

function recordId(memory: MemoryRef): string {
  return core.uuidId(typeof memory === "string" ? memory : memory?.id, "A memory id");
}

/** The write body (`POST /api/v1/memories/`, and each batch item); optional fields left out when not given. */
function writeBody(draft: MemoryDraft): WriteBody {
  if (!(draft.provenance instanceof Provenance)) {
    throw new InvalidArgument("provenance must be a Provenance (Provenance.userTurn(...), Provenance.webPage(...), ...).");
  }
  const body: WriteBody = {
    kind: draft.kind,
    subject: draft.subject,
    purpose: draft.purpose,
    content: draft.content,
    authority: draft.authority ?? draft.provenance.defaultAuthority,
    confidence: draft.confidence,
    provenance: draft.provenance.toJSON(),
  };
  if (draft.ttlSeconds !== undefined) body.ttl_seconds = draft.ttlSeconds;
  if (draft.expiresAt !== undefined) body.expires_at = isoOrNull(draft.expiresAt);
  if (draft.validFrom !== undefined) body.valid_from = isoOrNull(draft.validFrom);
  if (draft.validTo !== undefined) body.valid_to = isoOrNull(draft.validTo);
  if (draft.supersedes !== undefined) {
    body.supersedes = recordId(draft.supersedes);
    const version = draft.supersedesVersion ?? (draft.supersedes as Partial<Memory>).version;
    if (version !== undefined) body.supersedes_version = version;
  } else if (draft.supersedesVersion !== undefined) {
    body.supersedes_version = draft.supersedesVersion;
  }
  if (draft.derivedFrom !== undefined && draft.derivedFrom.length > 0) body.derived_from = draft.derivedFrom.map(recordId);
  return body;
}

function listQuery(options: ListOptions): string {
  const params = new URLSearchParams({ page_size: String(options.pageSize ?? 100) });
  const ordering = Array.isArray(options.ordering) ? options.ordering.join(",") : options.ordering;
  const filters: Record<string, string | null | undefined> = {
    status: options.status,
    kind: options.kind,
    subject: options.subject,
    purpose: options.purpose,
    authority: options.authority,
    trust: options.trust,
    source_type: options.sourceType,
    created_after: isoOrNull(options.createdAfter),
    created_before: isoOrNull(options.createdBefore),
    ordering,
    ...options.filters,
  };
  for (const [name, value] of Object.entries(filters)) {
    if (value !== undefined && value !== null) params.set(name, value);
  }
  return params.toString();
}

function jsonBody(text: string, status: number): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new UnexpectedResponse(`The server answered ${status} without a JSON body.`, status);
  }
}

/**
 * The problem in an error response; a body that is not one (say, a proxy's HTML page) gives a
 * minimal problem from the status line.
 */
function problemBody(text: string, response: Response, url: string): ProblemBody {
  try {
    const body: unknown = JSON.parse(text);
    if (typeof body === "object" && body !== null && !Array.isArray(body)) return body as ProblemBody;
  } catch {
    // not JSON: described from the status line below
  }
  return {
    type: "about:blank",
    title: response.statusText || "Request failed",
    status: response.status,
    detail: "",
    instance: new URL(url).pathname,
  };
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? ` (${error.cause.message})` : "";
  return `${error.name}: ${error.message}${cause}`;
}
