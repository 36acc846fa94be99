// The TypeScript client end to end against a live server (the same scenarios as the Python
// client's tests/clients/test_client.py): writes and their idempotency keys on retry, provenance
// helpers and the authority they pick, quarantine, recall as a prompt block, 409 with the current
// version, typed errors with field messages, forget and its status, batch and pages.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { test } from "node:test";

import {
  AuthenticationError,
  Client,
  Conflict,
  InvalidArgument,
  NotFound,
  PROMPT_HEADER,
  Provenance,
  ScopeDenied,
  TransportError,
  ValidationError,
} from "governed-memory-client";

import { allAbout, freshSubject, postsTo, recordingFetch, server, sessionOf, setting, userFact } from "./support.mjs";

const fast = { backoffSeconds: 0.01 };

test("a user turn is remembered active and recalled as one prompt block", async () => {
  const client = new Client(server());
  const subject = freshSubject();
  const memory = await client.remember("Acme prefers email over phone.", userFact(subject, 12));
  assert.deepEqual([memory.status, memory.authority, memory.trust, memory.version], ["active", "user", "trusted", 1]);
  assert.equal(memory.awaitingReview, false);
  assert.equal(memory.replayed, false);
  assert.equal(memory.provenance.source_type, "user_turn");
  const session = sessionOf(subject);
  assert.deepEqual([memory.provenance.session_id, memory.provenance.turn_id], [session, "12"]);
  assert.equal(memory.provenance.uri, `chat://session/${session}#turn-12`);
  assert.deepEqual(await client.get(memory.id), memory);
  assert.deepEqual(await client.get(memory), memory);

  const result = await client.recall("how does acme want to be contacted, email or phone", { purpose: "support", subject });
  assert.deepEqual([...result].map((item) => item.id), [memory.id]);
  const [item] = result.items;
  assert.deepEqual([item.authority, item.trust, item.provenance.session_id], ["user", "trusted", session]);
  const parts = Object.values(item.score_parts);
  assert.ok(parts.length > 0 && Math.abs(item.score - parts.reduce((a, b) => a + b, 0)) < 1e-3);
  assert.deepEqual(result.toPrompt().split("\n"), [PROMPT_HEADER, `- (trusted) ${item.context}`]);
  assert.deepEqual(result.toPrompt({ header: null, withTrust: false }).split("\n"), [`- ${item.context}`]);
  assert.ok(item.context.startsWith("[preference | user | confirmed "), item.context);
  assert.ok(item.context.endsWith("] Acme prefers email over phone."), item.context);
  assert.ok(item.relevance !== null && item.relevance > 0 && item.relevance <= 1);
  assert.equal(typeof result.min_relevance, "number");

  const nothing = await client.recall("nothing like this at all", { purpose: "support", subject: freshSubject("customer/zed") });
  assert.equal(nothing.toPrompt(), "");
  const strict = await client.recall("how does acme want to be contacted", { purpose: "support", subject, minRelevance: 1.0 });
  assert.deepEqual([strict.items.length, strict.below_floor, strict.min_relevance], [0, 1, 1.0]);
});

test("each provenance helper picks an authority the server accepts; untrusted sources land quarantined", async () => {
  const client = new Client(server());
  const subject = freshSubject();
  const session = sessionOf(subject);
  const helpers = [
    [Provenance.webPage("https://acme.example/contact"), "third_party"],
    [Provenance.toolOutput("crm.lookup", { session }), "third_party"],
    [Provenance.document("https://docs.example/acme.pdf"), "third_party"],
    [Provenance.imported("https://crm.example/export/7"), "third_party"],
    [Provenance.agentInference({ session }), "agent"],
    [Provenance.userTurn(session, 3, { contaminated: true }), "user"],
  ];
  for (const [provenance, authority] of helpers) {
    assert.equal(provenance.defaultAuthority, authority);
    const memory = await client.remember("Acme's support line moved to +1 555 0100.", userFact(subject, 1, { provenance }));
    assert.deepEqual([memory.authority, memory.provenance.source_type], [authority, provenance.sourceType]);
    assert.equal(memory.status, "quarantined", provenance.sourceType);
    assert.ok(memory.awaitingReview && memory.quarantine_reason);
  }
  assert.deepEqual((await client.recall("acme support line", { purpose: "support", subject })).items, []);
});

test("dates go out as ISO 8601, and a summary derived from other records awaits review", async () => {
  const client = new Client(server());
  const subject = freshSubject();
  const expiresAt = new Date(Date.now() + 5 * 86400 * 1000);
  const validFrom = new Date(Date.now() - 86400 * 1000);
  const dated = await client.remember("Acme's office is closed in August.", userFact(subject, 1, { expiresAt, validFrom }));
  assert.equal(Date.parse(dated.expires_at), expiresAt.getTime());
  assert.equal(Date.parse(dated.valid_from), validFrom.getTime());
  const ttl = await client.remember("Acme's office reopens in September.", userFact(subject, 2, { ttlSeconds: 3600 }));
  assert.ok(Math.abs(Date.parse(ttl.expires_at) - Date.parse(ttl.created_at) - 3600 * 1000) < 5000);

  const summary = await client.remember(
    "Acme's office is closed in August and reopens in September.",
    userFact(subject, 3, { kind: "semantic", provenance: Provenance.agentInference({ session: sessionOf(subject) }), derivedFrom: [dated, ttl.id] }),
  );
  assert.ok(summary.awaitingReview && summary.quarantine_reason);
  assert.deepEqual((await allAbout(client, subject)).map((m) => m.status), ["active", "active", "quarantined"]);
});

test("a write whose answer is lost is retried with the same key and stored once", async () => {
  const recording = recordingFetch({ lose: postsTo("/memories/") });
  const client = new Client({ ...server(), fetch: recording, retry: fast });
  const subject = freshSubject();
  const memory = await client.remember("Acme's renewal is in March.", userFact(subject));
  const other = await client.remember("Acme's renewal is handled by Dana.", userFact(subject));

  const [first, retry, nextCall] = recording.to("/memories/");
  assert.deepEqual([first.status, retry.status], [null, 201]); // the first answer was lost after the server wrote
  assert.equal(first.idempotencyKey, retry.idempotencyKey);
  assert.match(first.idempotencyKey, /^gmc-[0-9a-f]{32}$/);
  assert.notEqual(nextCall.idempotencyKey, first.idempotencyKey); // a new call gets a new key
  assert.ok(memory.replayed && !other.replayed);
  const stored = await allAbout(client, subject);
  assert.deepEqual(stored.map((m) => m.content), ["Acme's renewal is in March.", "Acme's renewal is handled by Dana."]);
});

test("a caller's own key makes a write safe to repeat from another process", async () => {
  const subject = freshSubject();
  const key = `s-1-turn-${randomUUID()}`;
  const first = await new Client(server()).remember("Acme's fiscal year ends in June.", userFact(subject, 40, { idempotencyKey: key }));
  const restarted = new Client(server());
  const again = await restarted.remember("Acme's fiscal year ends in June.", userFact(subject, 40, { idempotencyKey: key }));
  const mismatch = await restarted
    .remember("Acme's fiscal year ends in July.", userFact(subject, 40, { idempotencyKey: key }))
    .then(() => assert.fail("a reused key with another body must be refused"), (error) => error);
  assert.ok(mismatch instanceof Conflict);
  assert.deepEqual([mismatch.code, mismatch.current], ["idempotency_mismatch", null]);
  assert.ok(again.id === first.id && again.replayed);
  assert.equal((await allAbout(restarted, subject)).length, 1);
});

test("confirm is not retried after its answer is lost", async () => {
  const recording = recordingFetch({ lose: postsTo("/confirm/") });
  const client = new Client({ ...server(), fetch: recording, retry: fast });
  const memory = await client.remember("Prefers email over phone.", userFact(freshSubject()));
  await assert.rejects(client.confirm(memory), TransportError);
  // It did happen: a blind retry would have been a 409 (or a second confirmation).
  assert.equal((await client.get(memory.id)).version, 2);
  assert.equal(recording.to("/confirm/").length, 1);
});

test("forget is not retried after its answer is lost", async () => {
  const recording = recordingFetch({ lose: postsTo("/forget/") });
  const client = new Client({ ...server(), fetch: recording, retry: fast });
  const subject = freshSubject("customer/gone");
  await client.remember("Gone's phone is 555-0199.", userFact(subject));
  await assert.rejects(client.forget(subject, { reason: "erasure" }), TransportError);
  assert.equal(recording.to("/forget/").length, 1);
  assert.deepEqual((await client.recall("gone phone", { purpose: "support", subject })).items, []); // it happened
});

test("a stale confirm is a Conflict carrying the current version", async () => {
  const client = new Client(server());
  const subject = freshSubject();
  const memory = await client.remember("Prefers email over phone.", userFact(subject));
  const confirmed = await client.confirm(memory, { note: "checked the CRM" });
  assert.deepEqual([confirmed.version, confirmed.status], [2, "active"]);
  assert.ok(Date.parse(confirmed.confirmed_at) >= Date.parse(memory.confirmed_at));

  const stale = await client.confirm(memory, { note: "checked again" }).then(assert.fail, (error) => error); // looked at version 1
  assert.ok(stale instanceof Conflict);
  assert.deepEqual([stale.status, stale.code, stale.currentVersion, stale.current.id], [409, "stale_version", 2, memory.id]);
  assert.match(stale.message, /current version: 2/);
  assert.equal((await client.confirm(stale.current)).version, 3); // decide again on the current record
  assert.equal((await client.confirm(memory.id, { expectedVersion: 3 })).version, 4);
  await assert.rejects(client.confirm(memory.id), InvalidArgument); // an id alone: which version?

  const correction = await client
    .remember("Acme now prefers phone.", userFact(subject, 1, { supersedes: memory })) // a version that moved on
    .then(assert.fail, (error) => error);
  assert.ok(correction instanceof Conflict);
  assert.equal(correction.currentVersion, 4);
  const fixed = await client.remember("Acme now prefers phone.", userFact(subject, 1, { supersedes: correction.current }));
  assert.equal(fixed.supersedes, memory.id);
  assert.equal((await client.get(memory.id)).status, "superseded");
});

test("errors are typed and carry the server's field messages; a failed request writes nothing", async () => {
  const client = new Client(server());
  const subject = freshSubject();
  const laundered = await client // a web page never speaks for the user
    .remember("Prefers email.", userFact(subject, 1, { provenance: Provenance.webPage("https://acme.example"), authority: "user" }))
    .then(assert.fail, (error) => error);
  assert.ok(laundered instanceof ValidationError);
  assert.equal(laundered.status, 400);
  assert.deepEqual(Object.keys(laundered.errors), ["authority"]);
  assert.match(laundered.errors.authority.join(" "), /web_page/);
  assert.match(laundered.message, /authority: A web_page source cannot carry user authority/);

  const invalid = await client
    .remember("Prefers email.", userFact(subject, 1, { confidence: 1.5, kind: "no-such-kind" }))
    .then(assert.fail, (error) => error);
  assert.ok(invalid instanceof ValidationError);
  assert.deepEqual(Object.keys(invalid.errors).sort(), ["confidence", "kind"]);
  assert.match(invalid.message, /kind: Unknown kind\./);

  const denied = await client.remember("Prefers email.", userFact(subject, 1, { purpose: "sales" })).then(assert.fail, (e) => e);
  assert.ok(denied instanceof ScopeDenied);
  assert.ok(denied.status === 403 && "purpose" in denied.errors);

  const missing = await client.get(randomUUID()).then(assert.fail, (error) => error);
  assert.ok(missing instanceof NotFound && missing.status === 404);
  await assert.rejects(client.forgetStatus(randomUUID()), NotFound);
  await assert.rejects(new Client({ ...server(), token: "gma_not-a-token" }).recall("anything", { purpose: "support" }), AuthenticationError);
  const reader = new Client({ ...server(), token: setting("GM_TEST_READER_TOKEN") }); // no forget capability
  await assert.rejects(reader.forget(subject), ScopeDenied);
  assert.deepEqual(await allAbout(client, subject), []);
});

test("values that could reach another endpoint or break a header are refused before anything is sent", async () => {
  const recording = recordingFetch();
  const client = new Client({ ...server(), fetch: recording });
  const subject = freshSubject();
  for (const id of ["../forget/", "6f1c2b7e-0c4a-4d8e-9b1a-2f3c4d5e6f70/confirm", ""]) {
    await assert.rejects(client.get(id), InvalidArgument);
    await assert.rejects(client.forgetStatus(id), InvalidArgument);
  }
  await assert.rejects(client.remember("x", userFact(subject, 1, { idempotencyKey: "has a space" })), InvalidArgument);
  await assert.rejects(client.remember("x", userFact(subject, 1, { idempotencyKey: "k".repeat(201) })), InvalidArgument);
  await assert.rejects(client.remember("lone \ud800 surrogate", userFact(subject)), InvalidArgument);
  await assert.rejects(client.remember("x", userFact(subject, 1, { supersedes: "../../recall" })), InvalidArgument);
  assert.deepEqual(recording.exchanges, []);
  // An id in another spelling of the same UUID reaches the same record.
  const memory = await client.remember("Acme's office is in Lyon.", userFact(subject));
  assert.equal((await client.get(memory.id.toUpperCase().replaceAll("-", ""))).id, memory.id);
});

test("forget hides the subject at once and its status follows propagation", async () => {
  const client = new Client(server());
  const subject = freshSubject("customer/zed");
  for (const n of [1, 2]) await client.remember(`Zed's phone is 555-010${n}.`, userFact(subject, n));
  const request = await client.forget(subject, { reason: "erasure request #7" });
  assert.deepEqual([request.status, request.affected, request.subject, request.completed], ["propagating", 2, subject, false]);
  assert.deepEqual((await client.recall("zed phone", { purpose: "support", subject })).items, []);
  assert.equal((await client.forgetStatus(request.id)).status, "propagating");

  // What beat would run next: the propagate_forgets job, once, as `manage.py run_job` runs it.
  const [command, ...args] = JSON.parse(setting("GM_TEST_PROPAGATE_COMMAND"));
  execFileSync(command, args, { stdio: "pipe" });

  const done = await client.forgetStatus(request);
  assert.ok(done.completed && done.completed_at !== null && done.receipts.length > 0);
  // every receipt is complete but the disk's, which the disk_rewrite job completes once it verified
  assert.ok(done.receipts.every((receipt) => receipt.artifact && (receipt.completed_at || receipt.artifact === "disk")));
  const forgotten = [];
  for await (const memory of client.list({ status: "forgotten", pageSize: 50 })) forgotten.push(memory);
  assert.ok(forgotten.length >= 2 && forgotten.every((m) => m.status === "forgotten" && m.content === null));
});

test("a batch is sent in chunks with item keys and list iterates every page", async () => {
  const recording = recordingFetch({ lose: postsTo("/memories/batch/") }); // the first chunk's answer is lost
  const client = new Client({ ...server(), fetch: recording, retry: fast });
  const subject = freshSubject();
  const drafts = Array.from({ length: 104 }, (_, n) => ({
    content: `Acme office fact ${n}.`,
    ...userFact(subject, n, { kind: "semantic", confidence: 0.8 }),
  }));
  drafts[3] = { ...drafts[3], confidence: 7 }; // invalid: that item's error only
  const result = await client.rememberMany(drafts);
  const listed = [];
  for await (const memory of client.list({ subject, ordering: ["created_at"], pageSize: 40 })) listed.push(memory);

  assert.deepEqual([...result].map((r) => r.index), [...Array(104).keys()]);
  assert.equal([...result].filter((r) => r.status === 201).length, 103);
  assert.ok(!result.results[3].ok && result.results[3].error instanceof ValidationError);
  assert.ok("confidence" in result.results[3].error.errors);
  assert.deepEqual(result.failed.map((r) => r.index), [3]);
  assert.deepEqual(new Set(result.memories.map((m) => m.status)), new Set(["active"]));
  assert.deepEqual(recording.to("/memories/batch/").map((b) => b.status), [null, 200, 200]); // chunk 1 lost, sent again, then chunk 2
  const [lost, resent, second] = recording.to("/memories/batch/").map((b) => b.body.items.map((item) => item.idempotency_key));
  assert.deepEqual(resent, lost); // each item keeps its key on the resend
  assert.ok([...lost, ...second].every((key) => /^gmc-[0-9a-f]{32}$/.test(key)));
  assert.equal(new Set([...lost, ...second]).size, 104);

  assert.equal(recording.to("/memories/").length, 3); // pages of 40, 40, 23
  assert.equal(listed.length, 103); // the resent chunk replayed its items' keys
  assert.deepEqual(listed.map((m) => m.id), result.memories.map((m) => m.id));
});
