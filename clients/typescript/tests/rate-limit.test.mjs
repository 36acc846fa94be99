// A 429 honoured, against a live server with a tiny rate limit (3 requests a second per token;
// GM_TEST_LIMITED_URL, with a token of its own): the client waits what Retry-After says and sends
// the same write again (same idempotency key), so a burst of writes lands exactly once each; past
// the policy's patience it throws RateLimited carrying the Retry-After.

import assert from "node:assert/strict";
import { test } from "node:test";

import { Client, NO_RETRY, RateLimited } from "governed-memory-client";

import { allAbout, freshSubject, recordingFetch, setting, userFact } from "./support.mjs";

const WRITES = 7;
const limited = () => ({ baseUrl: setting("GM_TEST_LIMITED_URL"), token: setting("GM_TEST_LIMITED_TOKEN") });

test("a burst of writes waits out each 429 and lands once each", async () => {
  const recording = recordingFetch();
  const client = new Client({ ...limited(), fetch: recording });
  const subject = freshSubject();
  const memories = [];
  for (let n = 0; n < WRITES; n++) memories.push(await client.remember(`Acme fact number ${n}.`, userFact(subject, n)));

  assert.equal(new Set(memories.map((m) => m.id)).size, WRITES);
  const sent = recording.exchanges;
  const refused = sent.flatMap((exchange, i) => (exchange.status === 429 ? [i] : []));
  assert.ok(refused.length > 0, "the burst never met the rate limit");
  for (const i of refused) {
    const [limitedCall, retried] = [sent[i], sent[i + 1]];
    assert.equal(retried.idempotencyKey, limitedCall.idempotencyKey); // the same write, sent again
    assert.ok(limitedCall.retryAfter);
    assert.ok(retried.sentAt - limitedCall.sentAt >= Number(limitedCall.retryAfter) * 1000);
  }
  assert.equal(sent.filter((exchange) => exchange.status === 201).length, WRITES);
  assert.equal((await allAbout(client, subject)).length, WRITES); // no write stored twice
});

test("a client that will not wait gets RateLimited with the Retry-After", async () => {
  const impatient = new Client({ ...limited(), retry: { maxRetryAfterSeconds: 0.5 } }); // shorter than the server's 1 s
  const refused = await (async () => {
    for (let i = 0; i < 10; i++) for await (const _ of impatient.list({ pageSize: 1 })) break;
  })().then(() => assert.fail("ten reads in a burst never met the limit"), (error) => error);
  assert.ok(refused instanceof RateLimited);
  assert.deepEqual([refused.status, refused.code], [429, "throttled"]);
  assert.ok(refused.retryAfter >= 1);

  const once = new Client({ ...limited(), retry: NO_RETRY });
  await assert.rejects(async () => {
    for (let i = 0; i < 10; i++) for await (const _ of once.list({ pageSize: 1 })) break;
  }, RateLimited);
});
