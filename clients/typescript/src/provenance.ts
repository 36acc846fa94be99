/**
 * Where a claim came from: build it with the helper for its source. Each helper picks the
 * authority that fits (`defaultAuthority`), which `remember` uses unless told otherwise.
 */

import type { components } from "./api-types.js";

type Schemas = components["schemas"];
export type SourceType = Schemas["SourceTypeEnum"];
export type Authority = Schemas["AuthorityEnum"];
export type Trust = Schemas["TrustEnum"];
export type Status = Schemas["MemoryRecordStatusEnum"];

/**
 * The provenance of a write as sent. The fields of signed provenance (`source`, `signature`) are
 * sent only when a signed result was attached (`Provenance.withSignature`).
 */
export type ProvenanceBody = Schemas["ProvenanceRequest"] & { source?: string; signature?: string };

/**
 * What a source signed (`signResult` from `governed-memory-client/signing` makes it): the
 * registered source's name, the version of the source read, when it was observed (sent exactly as
 * signed) and the base64 Ed25519 signature.
 */
export interface SignedResult {
  readonly source: string;
  readonly source_version: string;
  readonly observed_at: string;
  readonly signature: string;
}

/**
 * The authority a claim from each kind of source carries unless the caller says otherwise: what
 * the user said is the user's; what was read from a page, a tool or a document is someone else's
 * (third party); what the agent concluded is the agent's; configuration is the operator's. The
 * server checks the pairing and refuses one that does not fit (a web page never speaks for the user).
 */
export const DEFAULT_AUTHORITY: Readonly<Record<SourceType, Authority>> = {
  user_turn: "user",
  tool_output: "third_party",
  web_page: "third_party",
  document: "third_party",
  import: "third_party",
  agent_inference: "agent",
  operator_config: "operator",
};

export type DateInput = Date | string;

export interface ProvenanceFields {
  uri?: string | null;
  sessionId?: string | null;
  turnId?: string | null;
  tool?: string | null;
  sourceVersion?: string | null;
  observedAt?: DateInput | null;
  contaminated?: boolean;
  source?: string | null;
  signature?: string | null;
}

/**
 * Where a claim came from. `contaminated: true` says the writing session had read external content
 * (a page, a tool's output, a document) before this claim: the server then quarantines the write
 * whatever it claims, so a human reviews it before it can shape the agent.
 */
export class Provenance {
  readonly sourceType: SourceType;
  readonly uri: string | null;
  readonly sessionId: string | null;
  readonly turnId: string | null;
  readonly tool: string | null;
  readonly sourceVersion: string | null;
  readonly observedAt: string | null;
  readonly contaminated: boolean;
  readonly source: string | null;
  readonly signature: string | null;

  constructor(sourceType: SourceType, fields: ProvenanceFields = {}) {
    this.sourceType = sourceType;
    this.uri = fields.uri ?? null;
    this.sessionId = fields.sessionId ?? null;
    this.turnId = fields.turnId ?? null;
    this.tool = fields.tool ?? null;
    this.sourceVersion = fields.sourceVersion ?? null;
    this.observedAt = isoOrNull(fields.observedAt);
    this.contaminated = fields.contaminated ?? false;
    this.source = fields.source ?? null;
    this.signature = fields.signature ?? null;
  }

  /** The authority `remember` sends unless told otherwise. */
  get defaultAuthority(): Authority {
    return DEFAULT_AUTHORITY[this.sourceType] ?? "agent";
  }

  /**
   * What the end user said in `session` at `turn`: authority `user` (admitted without review
   * from a clean session).
   */
  static userTurn(
    session: string,
    turn: string | number,
    options: { uri?: string; observedAt?: DateInput; contaminated?: boolean } = {},
  ): Provenance {
    const [sessionId, turnId] = [String(session), String(turn)];
    return new Provenance("user_turn", {
      uri: options.uri ?? `chat://session/${sessionId}#turn-${turnId}`,
      sessionId,
      turnId,
      observedAt: options.observedAt ?? null,
      contaminated: options.contaminated ?? false,
    });
  }

  /** Read from a web page: authority `third_party`, always reviewed before it is recalled. */
  static webPage(url: string, options: { version?: string; observedAt?: DateInput; session?: string } = {}): Provenance {
    return new Provenance("web_page", {
      uri: url,
      sourceVersion: options.version ?? null,
      observedAt: options.observedAt ?? null,
      sessionId: options.session ?? null,
    });
  }

  /**
   * Returned by a tool (`tool` is its name; give the `session` or the `uri` it read): authority
   * `third_party`, reviewed before it is recalled (unless a registered source signed it and the
   * kind's policy admits verified claims: `withSignature`).
   */
  static toolOutput(
    tool: string,
    options: {
      session?: string;
      turn?: string | number;
      uri?: string;
      version?: string;
      observedAt?: DateInput;
      contaminated?: boolean;
    } = {},
  ): Provenance {
    return new Provenance("tool_output", {
      uri: options.uri ?? null,
      sessionId: options.session ?? null,
      turnId: options.turn === undefined ? null : String(options.turn),
      tool,
      sourceVersion: options.version ?? null,
      observedAt: options.observedAt ?? null,
      contaminated: options.contaminated ?? false,
    });
  }

  /** Read from a document at `uri`: authority `third_party`, reviewed. */
  static document(
    uri: string,
    options: { version?: string; observedAt?: DateInput; session?: string; contaminated?: boolean } = {},
  ): Provenance {
    return new Provenance("document", {
      uri,
      sourceVersion: options.version ?? null,
      observedAt: options.observedAt ?? null,
      sessionId: options.session ?? null,
      contaminated: options.contaminated ?? false,
    });
  }

  /** The agent's own conclusion: authority `agent`, always reviewed. */
  static agentInference(
    options: { session?: string; turn?: string | number; observedAt?: DateInput; contaminated?: boolean } = {},
  ): Provenance {
    return new Provenance("agent_inference", {
      sessionId: options.session ?? null,
      turnId: options.turn === undefined ? null : String(options.turn),
      observedAt: options.observedAt ?? null,
      contaminated: options.contaminated ?? false,
    });
  }

  /** Configured by the operator: authority `operator` (the token needs that capability). */
  static operatorConfig(options: { uri?: string; version?: string; observedAt?: DateInput } = {}): Provenance {
    return new Provenance("operator_config", {
      uri: options.uri ?? null,
      sourceVersion: options.version ?? null,
      observedAt: options.observedAt ?? null,
    });
  }

  /** Brought in from another system (source type `import`): authority `third_party`, reviewed. */
  static imported(uri: string, options: { version?: string; observedAt?: DateInput } = {}): Provenance {
    return new Provenance("import", {
      uri,
      sourceVersion: options.version ?? null,
      observedAt: options.observedAt ?? null,
    });
  }

  /**
   * This provenance carrying a source's signed result: its source name, source version,
   * observation time (exactly as signed) and signature. The server verifies the signature against
   * the source's registered key, the content and the subject of the write.
   */
  withSignature(signed: SignedResult): Provenance {
    return new Provenance(this.sourceType, {
      ...this.fields(),
      source: signed.source,
      sourceVersion: signed.source_version,
      observedAt: signed.observed_at,
      signature: signed.signature,
    });
  }

  /** The provenance as the write body carries it. */
  toJSON(): ProvenanceBody {
    const body: ProvenanceBody = {
      source_type: this.sourceType,
      uri: this.uri,
      session_id: this.sessionId,
      turn_id: this.turnId,
      tool: this.tool,
      source_version: this.sourceVersion,
      observed_at: this.observedAt,
      contaminated: this.contaminated,
    };
    if (this.source !== null) body.source = this.source;
    if (this.signature !== null) body.signature = this.signature;
    return body;
  }

  private fields(): ProvenanceFields {
    return {
      uri: this.uri,
      sessionId: this.sessionId,
      turnId: this.turnId,
      tool: this.tool,
      sourceVersion: this.sourceVersion,
      observedAt: this.observedAt,
      contaminated: this.contaminated,
      source: this.source,
      signature: this.signature,
    };
  }
}

/** A date-time as the API takes it: a Date as ISO 8601 (UTC), a string as given. */
export function isoOrNull(value: DateInput | null | undefined): string | null {
  if (value === undefined || value === null) return null;
  return value instanceof Date ? value.toISOString() : value;
}
