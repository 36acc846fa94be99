// Shared by the node tests: the live server's settings from the environment (bin/test's pytest
// module tests/clients/test_typescript_client.py sets them), a fetch that records every exchange
// and can lose a chosen answer after the server processed it, and a clean user-turn write.

import { randomUUID } from "node:crypto";

import { Provenance } from "governed-memory-client";

/** A setting the pytest module must pass; missing is a failure, never a skip. */
export function setting(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run these tests through tests/clients/test_typescript_client.py (bin/test).`);
  return value;
}

export const server = () => ({ baseUrl: setting("GOVERNED_MEMORY_URL"), token: setting("GOVERNED_MEMORY_TOKEN") });

/** A subject no other test writes about, so tests running side by side never see each other's memories. */
export function freshSubject(prefix = "customer/acme") {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

/**
 * The chat session of a test's writes, one per subject: the server remembers a session that read
 * external content (a tool's output, a page) and quarantines its later writes, so tests sharing the
 * database must not share sessions.
 */
export function sessionOf(subject) {
  return `s-${subject.split("-").pop()}`;
}

/** remember() arguments for a clean user turn (admitted without review). */
export function userFact(subject, n = 1, overrides = {}) {
  return {
    subject,
    purpose: "support",
    kind: "preference",
    confidence: 0.9,
    provenance: Provenance.userTurn(sessionOf(subject), n),
    ...overrides,
  };
}

/**
 * The platform's fetch, recording every exchange (method, path, idempotency key, JSON body,
 * status, when it was sent, Retry-After). `lose` chooses answers to drop after the server has processed the
 * request, as a dropped connection would (at most `times` of them): the client then sees the
 * same TypeError that fetch throws for a broken connection.
 */
export function recordingFetch({ lose = null, times = 1 } = {}) {
  const exchanges = [];
  const attempts = {};
  let remaining = times;
  const recording = async (url, init = {}) => {
    const method = init.method ?? "GET";
    attempts[method] = (attempts[method] ?? 0) + 1;
    const path = new URL(url).pathname;
    const sentAt = performance.now();
    const response = await fetch(url, init);
    const body = await response.arrayBuffer();
    const dropped = lose !== null && remaining > 0 && lose({ method, path });
    if (dropped) remaining -= 1;
    exchanges.push({
      method,
      path,
      idempotencyKey: new Headers(init.headers).get("Idempotency-Key"),
      body: typeof init.body === "string" ? JSON.parse(init.body) : null,
      status: dropped ? null : response.status,
      sentAt,
      retryAfter: response.headers.get("Retry-After"),
    });
    if (dropped) throw new TypeError("fetch failed", { cause: new Error("the connection dropped before the answer arrived") });
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
  recording.exchanges = exchanges;
  recording.attempts = attempts;
  recording.to = (suffix) => exchanges.filter((exchange) => exchange.path.endsWith(suffix));
  return recording;
}

export const postsTo = (suffix) => ({ method, path }) => method === "POST" && path.endsWith(suffix);

/** Every memory about `subject`, whatever its status. */
export async function allAbout(client, subject) {
  const memories = [];
  for await (const memory of client.list({ subject, ordering: "created_at" })) memories.push(memory);
  return memories;
}
