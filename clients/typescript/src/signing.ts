/**
 * Signed provenance, for the source's side (a tool, a system of record): `signResult` signs what a
 * source asserts with its Ed25519 key, and `Provenance.withSignature` attaches it to a write.
 *
 *     import { signResult } from "governed-memory-client/signing";
 *     const signed = signResult({ source: "crm", sourceVersion: "contact-42@v7", content, subject, privateKey });
 *     await client.remember(content, { subject, ..., provenance: Provenance.toolOutput("crm.lookup").withSignature(signed) });
 *
 * The signature is base64 of the Ed25519 signature over the RFC 8785 canonical JSON of
 * `{"source", "source_version", "content_sha256", "subject", "observed_at"}`. Every value is a
 * string, so the canonical form is the object with its keys sorted, serialised by JSON.stringify
 * (whose string escaping is the one RFC 8785 specifies). This module needs `node:crypto` (Node,
 * Deno, Bun); the client itself does not, so it is a separate entry point.
 */

import { createHash, createPrivateKey, type KeyObject, sign } from "node:crypto";

import { InvalidArgument } from "./errors.js";
import { type DateInput, isoOrNull, type SignedResult } from "./provenance.js";

export type { SignedResult } from "./provenance.js";

/** An Ed25519 private key: a KeyObject, PEM (PKCS #8), or the raw 32-byte key (bytes or base64). */
export type PrivateKeyInput = KeyObject | string | Uint8Array;

export interface SignInput {
  /** The registered source's name. */
  source: string;
  /** The version of the source read (immutable: the same version never names other content). */
  sourceVersion: string;
  /** The content exactly as the write will send it. */
  content: string;
  /** The subject exactly as the write will send it. */
  subject: string;
  /** When the claim was observed at the source. Default: now. Sent exactly as signed. */
  observedAt?: DateInput;
  privateKey: PrivateKeyInput;
}

export interface SignedClaim {
  readonly source: string;
  readonly source_version: string;
  readonly content_sha256: string;
  readonly subject: string;
  readonly observed_at: string;
}

// The PKCS #8 DER prefix of an Ed25519 private key (RFC 8410); the raw 32-byte key follows it.
const ED25519_PKCS8_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Lower-case hex SHA-256 of the content's UTF-8 bytes. */
export function contentSha256(content: string): string {
  return createHash("sha256").update(content, "utf8").digest("hex");
}

/** The claim a signature covers. */
export function signedClaim(input: Omit<SignInput, "privateKey">): SignedClaim {
  const claim: SignedClaim = {
    source: input.source,
    source_version: input.sourceVersion,
    content_sha256: contentSha256(wellFormed(input.content, "content")),
    subject: input.subject,
    observed_at: isoOrNull(input.observedAt) ?? new Date().toISOString(),
  };
  for (const [name, value] of Object.entries(claim)) {
    if (typeof value !== "string" || value === "") throw new InvalidArgument(`${name} must be a non-empty string.`);
    wellFormed(value, name);
  }
  return claim;
}

/** RFC 8785 canonical JSON of a claim (all string values): keys sorted, JSON.stringify's escaping. */
export function canonicalJson(claim: SignedClaim): string {
  const sorted = Object.keys(claim)
    .sort()
    .map((key) => [key, claim[key as keyof SignedClaim]] as const);
  return JSON.stringify(Object.fromEntries(sorted));
}

/**
 * Sign a result as its source: returns the fields to attach to the write's provenance
 * (`Provenance.toolOutput(...).withSignature(signed)`), `content_sha256` included for the record.
 */
export function signResult(input: SignInput): SignedResult & { readonly content_sha256: string } {
  const claim = signedClaim(input);
  const key = privateKey(input.privateKey);
  if (key.asymmetricKeyType !== "ed25519") throw new InvalidArgument("privateKey must be an Ed25519 private key.");
  const signature = sign(null, Buffer.from(canonicalJson(claim), "utf8"), key).toString("base64");
  return {
    source: claim.source,
    source_version: claim.source_version,
    observed_at: claim.observed_at,
    content_sha256: claim.content_sha256,
    signature,
  };
}

function privateKey(input: PrivateKeyInput): KeyObject {
  if (typeof input === "object" && !(input instanceof Uint8Array)) return input;
  if (typeof input === "string" && input.includes("-----BEGIN")) {
    try {
      return createPrivateKey(input);
    } catch {
      throw new InvalidArgument("privateKey is not a readable PEM private key.");
    }
  }
  const raw = typeof input === "string" ? Buffer.from(input, "base64") : Buffer.from(input);
  if (raw.length !== 32) throw new InvalidArgument("privateKey must be PEM, or the raw 32-byte Ed25519 key (bytes or base64).");
  return createPrivateKey({ key: Buffer.concat([ED25519_PKCS8_PREFIX, raw]), format: "der", type: "pkcs8" });
}

function wellFormed(value: string, name: string): string {
  if (typeof value !== "string") throw new InvalidArgument(`${name} must be a string.`);
  if (LONE_SURROGATE.test(value)) throw new InvalidArgument(`${name} is not valid Unicode (it holds a lone surrogate).`);
  return value;
}
