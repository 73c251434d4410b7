// A wasmprov provisioner plugin for the reference cloud, in JavaScript.
//
// Built with ComponentizeJS (the engine of `jco componentize`) against
// wasmprov's WIT (`wit/`, world `wasmprov:provisioner/provider@0.2.0`); it
// runs under the same sandbox, grants and limits as a Rust plugin. The
// reference cloud is the small node API of `host/fake/src/refcloud`.
//
// What every plugin keeps, and the conformance suite checks: nodes carry the
// owner and request-id labels, so the cloud is the source of truth;
// provision looks for the request's node before it creates one; describe
// returns this owner's nodes only, across every page; terminate and get
// never touch another owner's node; errors are the variant a caller acts on.

import { handle as send } from "wasi:http/outgoing-handler@0.2.12";
import { Fields, OutgoingRequest, OutgoingBody, IncomingBody } from "wasi:http/types@0.2.12";
import { get as configGet } from "wasi:config/store@0.2.0-rc.1";

const NAME = "refcloud-js";
const OWNER = "wasmprov-owner";
const REQUEST = "wasmprov-request";
const DIGEST = "wasmprov-request-digest";
const GIB = 1n << 30n;
const PER_PAGE = 100;
const MAX_PAGES = 1000;
const MAX_BODY = 16 << 20;
const LABEL = /^[A-Za-z0-9._\/-]{1,63}$/;

// The catalogue: prices come from here so that priceHint needs no I/O.
const ZONES = ["zone-a", "zone-b"];
const TYPES = [
  { name: "small", cpu: 2, gib: 4n, gpu: 0, vendor: undefined, onDemand: 0.02, spot: 0.008, zones: ZONES },
  { name: "medium", cpu: 4, gib: 8n, gpu: 0, vendor: undefined, onDemand: 0.04, spot: 0.016, zones: ZONES },
  { name: "large", cpu: 8, gib: 32n, gpu: 0, vendor: undefined, onDemand: 0.16, spot: 0.064, zones: ZONES },
  { name: "gpu", cpu: 8, gib: 64n, gpu: 1, vendor: "nvidia", onDemand: 1.1, spot: undefined, zones: ["zone-b"] },
];

// The cloud's states: [status, join state]; anything else is unknown.
const STATES = {
  provisioning: ["pending", "provisioning"],
  running: ["running", "joining"],
  deleting: ["deleting", "failed"],
};

/** A contract error: thrown, it becomes the export's `err` value. */
class ProvisionError extends Error {
  constructor(tag, val) {
    super(`${tag}: ${typeof val === "string" ? val : val.message}`);
    this.payload = { tag, val };
  }
}
const fail = (tag, val) => new ProvisionError(tag, val);
const transport = (message) => fail("transport", message);

// --- shapes and prices (no I/O) -------------------------------------------

function fits(e, shape) {
  if (shape.arch !== undefined || shape.gpuModel !== undefined || shape.diskBytes !== undefined) {
    return false; // the catalogue states no architecture, GPU model or disk
  }
  if (shape.instanceType !== undefined) return shape.instanceType === e.name;
  const vendorOk =
    shape.gpu === 0 ||
    shape.gpuVendor === undefined ||
    (e.vendor !== undefined && e.vendor.toLowerCase() === shape.gpuVendor.toLowerCase());
  return e.cpu + 1e-9 >= shape.cpu && e.gib * GIB >= shape.memoryBytes && e.gpu >= shape.gpu && vendorOk;
}

function priceOf(e, shape) {
  if (shape.zone !== undefined && !e.zones.includes(shape.zone)) return undefined;
  return shape.capacityType === "spot" ? e.spot : e.onDemand;
}

/** The cheapest type for the shape (ties by name) and its price. */
function pick(shape) {
  const candidates = TYPES.filter((e) => fits(e, shape));
  if (candidates.length === 0) {
    throw fail(
      "unsupported",
      shape.instanceType !== undefined
        ? `instance type ${JSON.stringify(shape.instanceType)} does not exist or lacks what the shape binds`
        : `no node type has ${shape.cpu} vCPU, ${shape.memoryBytes >> 20n} MiB and ${shape.gpu} GPU`,
    );
  }
  let best;
  for (const e of candidates) {
    const price = priceOf(e, shape);
    if (price === undefined) continue;
    if (!best || price < best.price || (price === best.price && e.name < best.name)) {
      best = { name: e.name, price };
    }
  }
  if (!best) {
    throw fail("capacity", {
      scope: "zone",
      message: `no fitting type is sold as ${shape.capacityType} in ${shape.zone ?? "any zone"}`,
    });
  }
  return best;
}

// --- HTTP through wasi:http ------------------------------------------------

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function request(method, url, token, body, headers = {}) {
  const [scheme, rest] = url.split("://");
  const slash = rest.indexOf("/");
  const authority = slash < 0 ? rest : rest.slice(0, slash);
  const path = slash < 0 ? "/" : rest.slice(slash);
  const entries = [
    ["authorization", encoder.encode(`Bearer ${token}`)],
    ["accept", encoder.encode("application/json")],
  ];
  if (body !== undefined) entries.push(["content-type", encoder.encode("application/json")]);
  for (const [k, v] of Object.entries(headers)) entries.push([k, encoder.encode(v)]);
  const req = new OutgoingRequest(Fields.fromList(entries));
  req.setMethod({ tag: method.toLowerCase() });
  req.setScheme({ tag: scheme === "https" ? "HTTPS" : "HTTP" });
  req.setAuthority(authority);
  req.setPathWithQuery(path);
  const outgoing = req.body();
  if (body !== undefined) {
    const bytes = encoder.encode(body);
    const stream = outgoing.write();
    for (let i = 0; i < bytes.length; i += 4096) {
      stream.blockingWriteAndFlush(bytes.subarray(i, i + 4096));
    }
    stream[Symbol.dispose]?.();
  }
  OutgoingBody.finish(outgoing, undefined);
  let future;
  try {
    future = send(req, undefined);
  } catch (e) {
    throw transport(`${method} ${url}: ${describeError(e)}`);
  }
  const ready = future.subscribe();
  ready.block();
  ready[Symbol.dispose]?.();
  const answer = future.get();
  if (answer === undefined || answer.tag === "err" || answer.val.tag === "err") {
    throw transport(`${method} ${url}: ${describeError(answer?.val?.val ?? answer)}`);
  }
  const response = answer.val.val;
  const status = response.status();
  const responseHeaders = {};
  for (const [k, v] of response.headers().entries()) responseHeaders[k.toLowerCase()] = decoder.decode(v);
  const incoming = response.consume();
  const input = incoming.stream();
  const chunks = [];
  let size = 0;
  for (;;) {
    let chunk;
    try {
      chunk = input.blockingRead(65536n);
    } catch (e) {
      const err = e?.payload ?? e;
      if (err?.tag === "closed") break;
      throw transport(`${method} ${url}: reading the answer: ${describeError(e)}`);
    }
    size += chunk.length;
    if (size > MAX_BODY) throw transport(`${method} ${url}: answer over ${MAX_BODY} bytes`);
    chunks.push(chunk);
  }
  input[Symbol.dispose]?.();
  IncomingBody.finish(incoming);
  const data = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    data.set(c, at);
    at += c.length;
  }
  return { status, headers: responseHeaders, text: decoder.decode(data) };
}

function describeError(e) {
  const v = e?.payload ?? e;
  if (v && typeof v === "object" && "tag" in v) return v.val === undefined ? v.tag : `${v.tag} ${JSON.stringify(v.val, (_, x) => (typeof x === "bigint" ? x.toString() : x))}`;
  return String(v);
}

function parseJson(what, text) {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw transport(`${what}: the answer is not JSON (${e.message})`);
  }
}

/** The contract error for an error answer of the cloud. */
function classify(what, { status, headers, text }) {
  let code = "";
  let message = text.slice(0, 200);
  try {
    const error = JSON.parse(text).error ?? {};
    code = error.code ?? "";
    message = error.message ?? message;
  } catch (_) {
    // not JSON: the status decides
  }
  const full = `${what}: ${status} ${code}: ${message}`;
  if (status === 429 || code === "rate_limited") {
    const retry = Number(headers["retry-after"]);
    const retryAfterMs = Number.isFinite(retry) && retry >= 0 ? BigInt(Math.round(retry * 1000)) : undefined;
    return fail("rate-limited", { retryAfterMs, message: full });
  }
  if (code === "quota_exceeded") return fail("quota", full);
  if (status === 401 || status === 403) return fail("auth", full);
  if (status === 422 || code === "insufficient_capacity") return fail("capacity", { scope: "zone", message: full });
  if (status === 404) return fail("not-found", full);
  if (status === 409) return fail("conflict", full);
  if (status >= 500) return transport(full);
  return fail("other", full);
}

// --- nodes ------------------------------------------------------------------

function toHandle(node) {
  if (!node || typeof node !== "object" || typeof node.id !== "string") {
    throw transport(`the cloud answered a node without an id: ${JSON.stringify(node)?.slice(0, 200)}`);
  }
  const [status, joinState] = STATES[node.state] ?? ["unknown", "provisioning"];
  const labels = Object.entries(node.labels ?? {})
    .map(([k, v]) => [String(k), String(v)])
    .sort();
  const address = typeof node.address === "string" ? node.address : undefined;
  return {
    providerId: node.id,
    status,
    rawState: typeof node.state === "string" ? node.state : undefined,
    createdAtMs: undefined,
    address,
    privateAddress: address,
    publicAddress: undefined,
    arch: undefined,
    gpuModel: undefined,
    zone: typeof node.zone === "string" ? node.zone : undefined,
    capacityType: node.capacity_type === "spot" ? "spot" : "on-demand",
    joinState,
    instanceType: typeof node.type === "string" ? node.type : undefined,
    labels,
  };
}

const has = (node, key, value) => node.labels.some(([k, v]) => k === key && v === value);
const labelOf = (node, key) => node.labels.find(([k]) => k === key)?.[1];

/** A short digest of the request's shape and boot data (FNV-1a, 64 bits). */
function requestDigest({ shape, boot }) {
  const text = JSON.stringify([shape, boot], (_, v) =>
    typeof v === "bigint" ? v.toString() : v instanceof Uint8Array ? Array.from(v) : v,
  );
  let h = 0xcbf29ce484222325n;
  for (const byte of encoder.encode(text)) {
    h ^= BigInt(byte);
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return h.toString(16).padStart(16, "0");
}

let settings;
function config() {
  if (settings === undefined) {
    let endpoint;
    let token;
    try {
      endpoint = configGet("endpoint") ?? "https://api.refcloud.example/v1";
      token = configGet("token");
    } catch (e) {
      throw fail("invalid-config", `reading config: ${describeError(e)}`);
    }
    if (!token) throw fail("invalid-config", "secret `token` is not set");
    if (!/^https?:\/\//.test(endpoint)) throw fail("invalid-config", `endpoint ${JSON.stringify(endpoint)} must be an http(s) URL`);
    settings = { endpoint: endpoint.replace(/\/+$/, ""), token };
  }
  return settings;
}

function call(what, method, path, body, headers, ok = [200]) {
  const { endpoint, token } = config();
  const answer = request(method, endpoint + path, token, body === undefined ? undefined : JSON.stringify(body), headers);
  if (!ok.includes(answer.status)) throw classify(what, answer);
  return answer;
}

function listNodes(ownerId, requestId) {
  const selector = `${OWNER}=${ownerId}` + (requestId ? `,${REQUEST}=${requestId}` : "");
  const nodes = [];
  let page = 1;
  for (let i = 0; i < MAX_PAGES; i++) {
    const path = `/nodes?label_selector=${encodeURIComponent(selector)}&page=${page}&per_page=${PER_PAGE}`;
    const answer = parseJson("list nodes", call("list nodes", "GET", path).text);
    if (!answer || !Array.isArray(answer.nodes)) throw transport("list nodes: the answer has no `nodes` list");
    for (const n of answer.nodes) nodes.push(toHandle(n));
    page = answer.next_page;
    if (page === null || page === undefined) break;
    if (!Number.isInteger(page)) throw transport(`list nodes: next_page is ${JSON.stringify(page)}`);
  }
  // The cloud filters by label; check again, as the contract promises.
  return nodes.filter((n) => has(n, OWNER, ownerId) && (!requestId || has(n, REQUEST, requestId)));
}

function read(ownerId, providerId) {
  if (!/^n-\d+$/.test(providerId)) return undefined;
  let answer;
  try {
    answer = call("get node", "GET", `/nodes/${providerId}`);
  } catch (e) {
    if (e?.payload?.tag === "not-found") return undefined;
    throw e;
  }
  const node = toHandle(parseJson("get node", answer.text)?.node);
  return has(node, OWNER, ownerId) ? node : undefined;
}

export const provisioner = {
  name() {
    return NAME;
  },
  capacityTypes() {
    return ["on-demand", "spot"];
  },
  priceHint(shape) {
    try {
      const { name, price } = pick(shape);
      return { hourlyUsd: price, capacityType: shape.capacityType, instanceType: name };
    } catch (e) {
      if (e?.payload?.tag === "unsupported" || e?.payload?.tag === "capacity") return undefined;
      throw e;
    }
  },
  provision(req) {
    const { shape, boot } = req;
    if (boot.image !== undefined || boot.userData !== undefined || boot.sshKeys.length > 0) {
      throw fail("unsupported", "the reference cloud takes no image, user data or SSH keys");
    }
    const digest = requestDigest(req);
    const labels = Object.fromEntries(shape.labels);
    labels[OWNER] = req.ownerId;
    labels[REQUEST] = req.requestId;
    labels[DIGEST] = digest;
    for (const [k, v] of Object.entries(labels)) {
      if (!LABEL.test(k) || !LABEL.test(v)) {
        throw fail("unsupported", `label ${k}=${v} is outside the reference cloud's label syntax [A-Za-z0-9._/-]{1,63}`);
      }
    }
    for (const node of listNodes(req.ownerId, req.requestId)) {
      const had = labelOf(node, DIGEST);
      if (had !== undefined && had !== digest) {
        throw fail("conflict", `request ${req.requestId} was first made with another shape or boot data (node ${node.providerId})`);
      }
      return node;
    }
    const { name } = pick(shape);
    const zone = shape.zone ?? TYPES.find((e) => e.name === name).zones[0];
    const body = { type: name, zone, capacity_type: shape.capacityType, labels };
    const key = `${req.ownerId}/${req.requestId}`.slice(0, 255);
    const answer = call("create node", "POST", "/nodes", body, { "idempotency-key": key }, [200, 201]);
    return toHandle(parseJson("create node", answer.text)?.node);
  },
  terminate(ownerId, providerId) {
    if (read(ownerId, providerId) === undefined) throw fail("not-found", `${providerId} is not a node of ${ownerId}`);
    call("delete node", "DELETE", `/nodes/${providerId}`, undefined, {}, [200, 204]);
  },
  describe(ownerId) {
    return listNodes(ownerId, undefined);
  },
  get(ownerId, providerId) {
    return read(ownerId, providerId);
  },
  offerings() {
    return TYPES.map((e) => ({
      instanceType: e.name,
      cpu: e.cpu,
      memoryBytes: e.gib * GIB,
      gpu: e.gpu,
      gpuVendor: e.vendor,
      gpuModel: undefined,
      arch: undefined,
      diskBytes: undefined,
      zones: [...e.zones],
      onDemandUsd: e.onDemand,
      spotUsd: e.spot,
    }));
  },
};
