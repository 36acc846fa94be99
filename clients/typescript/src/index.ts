/**
 * TypeScript client for the governed memory service: memories with provenance, authority, time
 * to live and human review.
 *
 *     import { Client, Provenance } from "governed-memory-client";
 *
 *     const memory = new Client(); // GOVERNED_MEMORY_URL, GOVERNED_MEMORY_TOKEN
 *     await memory.remember("Prefers email over phone.", { subject: "customer/acme", purpose: "support",
 *       kind: "preference", confidence: 0.9, provenance: Provenance.userTurn("s-1", 12) });
 *     console.log((await memory.recall("how to contact acme", { purpose: "support" })).toPrompt());
 *
 * Signing a source's results: `governed-memory-client/signing`.
 */

export type { components, operations, paths } from "./api-types.js";
export { Client } from "./client.js";
export type { ClientOptions, ListOptions, MemoryDraft, MemoryRef, RecallOptions, RememberOptions } from "./client.js";
export { DEFAULT_RETRY, NO_RETRY, type RetryPolicy } from "./core.js";
export {
  APIError,
  AuthenticationError,
  Conflict,
  GovernedMemoryError,
  InvalidArgument,
  NotFound,
  PROBLEM_TYPE_PREFIX,
  type ProblemBody,
  RateLimited,
  ScopeDenied,
  ServerError,
  TransportError,
  UnexpectedResponse,
  ValidationError,
} from "./errors.js";
export {
  type BatchItemResult,
  BatchResult,
  type ForgetRequest,
  type Memory,
  type MemoryRecord,
  PROMPT_HEADER,
  type PromptOptions,
  type PropagationReceipt,
  type RecallItem,
  type RecallResponse,
  RecallResult,
  type StoredProvenance,
} from "./models.js";
export {
  type Authority,
  type DateInput,
  DEFAULT_AUTHORITY,
  Provenance,
  type ProvenanceBody,
  type SignedResult,
  type SourceType,
  type Status,
  type Trust,
} from "./provenance.js";
export { VERSION } from "./version.js";
