// What the client decides without the service: its settings from the environment, what it
// retries after a proxy's gateway error (reads and writes with their keys, never forget), how a
// body that is not a problem still becomes a typed error, and the package's own metadata.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { Client, InvalidArgument, ServerError, UnexpectedResponse, VERSION } from "governed-memory-client";

const RECORD = {
  id: "6f1c2b7e-0c4a-4d8e-9b1a-2f3c4d5e6f70",
  status: "active",
  version: 1,
  provenance: { source_type: "user_turn" },
};

/** A fetch answering from a list of [status, body, headers], recording each request. */
function scripted(answers) {
  const requests = [];
  const fake = async (url, init = {}) => {
    requests.push({ url, method: init.method ?? "GET", headers: new Headers(init.headers) });
    const [status, body, headers = {}] = answers[Math.min(requests.length - 1, answers.length - 1)];
    return new Response(typeof body === "string" ? body : JSON.stringify(body), { status, headers });
  };
  fake.requests = requests;
  return fake;
}

const fast = { backoffSeconds: 0.001 };

test("the constructor reads GOVERNED_MEMORY_URL and GOVERNED_MEMORY_TOKEN, and says which is missing", async () => {
  const saved = { url: process.env.GOVERNED_MEMORY_URL, token: process.env.GOVERNED_MEMORY_TOKEN };
  try {
    process.env.GOVERNED_MEMORY_URL = "http://memory.internal:8000/api/v1";
    process.env.GOVERNED_MEMORY_TOKEN = "gma_from-env";
    const fake = scripted([[200, RECORD]]);
    const client = new Client({ fetch: fake });
    assert.equal(client.baseUrl, "http://memory.internal:8000/api/v1/");
    await client.get(RECORD.id);
    assert.equal(fake.requests[0].url, `http://memory.internal:8000/api/v1/memories/${RECORD.id}/`);
    assert.equal(new Client({ baseUrl: "http://other:1/" }).baseUrl, "http://other:1/api/v1/");

    delete process.env.GOVERNED_MEMORY_TOKEN;
    assert.throws(() => new Client(), (error) => error instanceof InvalidArgument && /GOVERNED_MEMORY_TOKEN/.test(error.message));
    delete process.env.GOVERNED_MEMORY_URL;
    assert.throws(() => new Client({ token: "gma_x" }), (error) => error instanceof InvalidArgument && /GOVERNED_MEMORY_URL/.test(error.message));
  } finally {
    for (const [name, value] of [["GOVERNED_MEMORY_URL", saved.url], ["GOVERNED_MEMORY_TOKEN", saved.token]]) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
});

test("a gateway error is retried for reads, never for forget, and a proxy's page becomes a typed error", async () => {
  const gateway = [503, "<html>Service Unavailable</html>", { "Content-Type": "text/html" }];
  const reads = scripted([gateway, gateway, [200, RECORD]]);
  const reader = new Client({ baseUrl: "http://memory.internal", token: "t", fetch: reads, retry: fast });
  assert.equal((await reader.get(RECORD.id)).id, RECORD.id);
  assert.equal(reads.requests.length, 3);

  const forgets = scripted([gateway]);
  const forgetter = new Client({ baseUrl: "http://memory.internal", token: "t", fetch: forgets, retry: fast });
  const error = await forgetter.forget("customer/acme").then(assert.fail, (e) => e);
  assert.ok(error instanceof ServerError);
  assert.deepEqual([error.status, error.instance, error.type], [503, "/api/v1/forget/", "about:blank"]);
  assert.equal(forgets.requests.length, 1);

  const giveUp = scripted([gateway]);
  const patient = new Client({ baseUrl: "http://memory.internal", token: "t", fetch: giveUp, retry: { ...fast, attempts: 3 } });
  await assert.rejects(patient.get(RECORD.id), ServerError);
  assert.equal(giveUp.requests.length, 3);
});

test("a success without a readable body is an UnexpectedResponse", async () => {
  const client = new Client({ baseUrl: "http://memory.internal", token: "t", fetch: scripted([[200, "not json"]]) });
  await assert.rejects(client.get(RECORD.id), UnexpectedResponse);
  const noId = new Client({ baseUrl: "http://memory.internal", token: "t", fetch: scripted([[200, { status: "active" }]]) });
  await assert.rejects(noId.get(RECORD.id), UnexpectedResponse);
});

test("requests carry the token and announce the package's version", async () => {
  const manifest = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
  assert.equal(VERSION, manifest.version);
  const fake = scripted([[200, RECORD]]);
  await new Client({ baseUrl: "http://memory.internal", token: "gma_t", fetch: fake }).get(RECORD.id);
  const { headers } = fake.requests[0];
  assert.equal(headers.get("User-Agent"), `governed-memory-client-typescript/${manifest.version}`);
  assert.equal(headers.get("Authorization"), "Bearer gma_t");
});
