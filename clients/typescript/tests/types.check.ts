// Compiled, never run (`npm run check`, after the build): the package's declarations as a strict
// TypeScript consumer sees them, through the package's own exports. Each @ts-expect-error must
// stay an error: the types say what the API accepts and returns.

import { Client, Conflict, type Memory, Provenance, RateLimited, type RecallItem } from "governed-memory-client";
import { signResult } from "governed-memory-client/signing";

export async function consumer(client: Client): Promise<void> {
  const fields = { subject: "customer/acme", purpose: "support", kind: "preference", confidence: 0.9 };
  const memory: Memory = await client.remember("Prefers email.", { ...fields, provenance: Provenance.userTurn("s-1", 1) });
  const status: "quarantined" | "active" | "rejected" | "superseded" | "expired" | "forgotten" = memory.status;
  const reason: string | null = memory.quarantine_reason;
  // @ts-expect-error: a write needs its provenance
  await client.remember("Prefers email.", fields);
  // @ts-expect-error: not an authority the API knows
  await client.remember("Prefers email.", { ...fields, provenance: Provenance.webPage("https://acme.example"), authority: "boss" });

  const recalled = await client.recall("email or phone", { purpose: "support", tokenBudget: 400 });
  const items: readonly RecallItem[] = recalled.items;
  const prompt: string = recalled.toPrompt({ header: null });
  // @ts-expect-error: recall items carry no version
  items[0]?.version;

  // @ts-expect-error: not a status
  for await (const _ of client.list({ status: "deleted" })) break;
  for await (const listed of client.list({ status: "quarantined", ordering: ["-created_at"], pageSize: 10 })) listed.id;

  try {
    await client.confirm(memory, { note: "checked" });
  } catch (error) {
    if (error instanceof Conflict) error.current?.version satisfies number | undefined;
    if (error instanceof RateLimited) error.retryAfter satisfies number | null;
  }
  const request = await client.forget("customer/acme", { reason: "erasure" });
  const done: boolean = (await client.forgetStatus(request)).completed;

  const signed = signResult({ source: "crm", sourceVersion: "v7", content: "x", subject: "customer/acme", privateKey: "" });
  Provenance.toolOutput("crm.lookup").withSignature(signed);
  console.log(status, reason, prompt, done);
}
