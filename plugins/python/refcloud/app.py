"""A wasmprov provisioner plugin for the reference cloud, in Python.

Built with componentize-py against wasmprov's WIT (`wit/`, world
`wasmprov:provisioner/provider@0.2.0`); it runs under the same sandbox,
grants and limits as a Rust plugin. The reference cloud is the small node
API of `host/fake/src/refcloud` (the fake is its specification).

What every plugin keeps, and the conformance suite checks: nodes carry the
owner and request-id labels, so the cloud is the source of truth; provision
looks for the request's node before it creates one; describe returns this
owner's nodes only, across every page; terminate and get never touch
another owner's node; errors are the variant a caller acts on.
"""

import hashlib
import json
from typing import Dict, List, Optional, Tuple
from urllib.parse import quote

from componentize_py_types import Err, Ok
from wit_world import exports
from wit_world.imports import outgoing_handler, store, streams
from wit_world.imports import wasi_http_types as http
from wit_world.imports import wasmprov_provisioner_types as t

NAME = "refcloud-py"
OWNER = "wasmprov-owner"
REQUEST = "wasmprov-request"
DIGEST = "wasmprov-request-digest"
GIB = 1 << 30
PER_PAGE = 100
MAX_PAGES = 1000
MAX_BODY = 16 << 20
LABEL_CHARS = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._/-")

# The catalogue: name, vCPUs, memory GiB, GPUs, GPU vendor, on-demand $/h,
# spot $/h (None: not sold as spot), zones. Prices come from here so that
# price_hint needs no I/O (the host allows none there).
ZONES = ["zone-a", "zone-b"]
TYPES = [
    ("small", 2.0, 4, 0, None, 0.020, 0.008, ZONES),
    ("medium", 4.0, 8, 0, None, 0.040, 0.016, ZONES),
    ("large", 8.0, 32, 0, None, 0.160, 0.064, ZONES),
    ("gpu", 8.0, 64, 1, "nvidia", 1.100, None, ["zone-b"]),
]

# The cloud's states: (status, join state); anything else is unknown.
STATES = {
    "provisioning": (t.NodeStatus.PENDING, t.JoinState.PROVISIONING),
    "running": (t.NodeStatus.RUNNING, t.JoinState.JOINING),
    "deleting": (t.NodeStatus.DELETING, t.JoinState.FAILED),
}


def fail(error) -> Err:
    return Err(error)


def transport(message: str) -> Err:
    return Err(t.ProvisionError_Transport(message))


# --- shapes and prices (no I/O) ---------------------------------------------


def fits(entry, shape: t.NodeShape) -> bool:
    name, cpu, gib, gpu, vendor, _, _, _ = entry
    if shape.arch is not None or shape.gpu_model is not None or shape.disk_bytes is not None:
        return False  # the catalogue states no architecture, GPU model or disk
    if shape.instance_type is not None:
        return shape.instance_type == name
    vendor_ok = shape.gpu == 0 or shape.gpu_vendor is None or (
        vendor is not None and vendor.lower() == shape.gpu_vendor.lower()
    )
    return cpu + 1e-9 >= shape.cpu and gib * GIB >= shape.memory_bytes and gpu >= shape.gpu and vendor_ok


def price_of(entry, shape: t.NodeShape) -> Optional[float]:
    _, _, _, _, _, on_demand, spot, zones = entry
    if shape.zone is not None and shape.zone not in zones:
        return None
    return spot if shape.capacity_type == t.CapacityType.SPOT else on_demand


def pick(shape: t.NodeShape) -> Tuple[str, float]:
    """The cheapest type for the shape (ties by name) and its price."""
    candidates = [e for e in TYPES if fits(e, shape)]
    if not candidates:
        if shape.instance_type is not None:
            raise fail(t.ProvisionError_Unsupported(
                f"instance type {shape.instance_type!r} does not exist or lacks what the shape binds"))
        raise fail(t.ProvisionError_Unsupported(
            f"no node type has {shape.cpu} vCPU, {shape.memory_bytes >> 20} MiB and {shape.gpu} GPU"))
    priced = [(p, e[0]) for e in candidates if (p := price_of(e, shape)) is not None]
    if not priced:
        where = shape.zone or "any zone"
        raise fail(t.ProvisionError_Capacity(t.CapacityError(
            t.CapacityScope.ZONE, f"no fitting type is sold as {capacity_text(shape.capacity_type)} in {where}")))
    price, name = min(priced)
    return name, price


def capacity_text(c: t.CapacityType) -> str:
    return "spot" if c == t.CapacityType.SPOT else "on-demand"


def place(name: str) -> str:
    return next(e[7][0] for e in TYPES if e[0] == name)


# --- HTTP through wasi:http --------------------------------------------------


def send(method, url: str, token: str, body: Optional[bytes] = None,
         headers: Optional[Dict[str, str]] = None) -> Tuple[int, Dict[str, str], bytes]:
    scheme, rest = url.split("://", 1)
    authority, _, path = rest.partition("/")
    entries = [("authorization", f"Bearer {token}".encode()), ("accept", b"application/json")]
    if body is not None:
        entries.append(("content-type", b"application/json"))
    for k, v in (headers or {}).items():
        entries.append((k, v.encode()))
    request = http.OutgoingRequest(http.Fields.from_list(entries))
    request.set_method(method)
    request.set_scheme(http.Scheme_Https() if scheme == "https" else http.Scheme_Http())
    request.set_authority(authority)
    request.set_path_with_query("/" + path)
    outgoing = request.body()
    if body:
        with outgoing.write() as out:
            for i in range(0, len(body), 4096):
                out.blocking_write_and_flush(body[i:i + 4096])
    http.OutgoingBody.finish(outgoing, None)
    try:
        future = outgoing_handler.handle(request, None)
    except Err as e:
        raise transport(f"{method_text(method)} {url}: {e.value}")
    with future.subscribe() as ready:
        ready.block()
    answer = future.get()
    if answer is None or isinstance(answer, Err) or isinstance(answer.value, Err):
        reason = answer.value.value if answer is not None and isinstance(answer, Ok) else answer
        raise transport(f"{method_text(method)} {url}: {reason}")
    response = answer.value.value
    status = response.status()
    response_headers = {k.lower(): v.decode(errors="replace") for k, v in response.headers().entries()}
    incoming = response.consume()
    data = bytearray()
    with incoming.stream() as stream:
        while True:
            try:
                chunk = stream.blocking_read(65536)
            except Err as e:
                if isinstance(e.value, streams.StreamError_Closed):
                    break
                raise transport(f"{method_text(method)} {url}: reading the answer: {e.value}")
            data.extend(chunk)
            if len(data) > MAX_BODY:
                raise transport(f"{method_text(method)} {url}: answer over {MAX_BODY} bytes")
    http.IncomingBody.finish(incoming)
    return status, response_headers, bytes(data)


def method_text(method) -> str:
    return type(method).__name__.split("_", 1)[1].upper()


def parse_json(what: str, data: bytes):
    try:
        return json.loads(data)
    except ValueError as e:
        raise transport(f"{what}: the answer is not JSON ({e})")


def classify(what: str, status: int, headers: Dict[str, str], data: bytes) -> Err:
    """The contract error for an error answer of the cloud."""
    code, message = "", data[:200].decode(errors="replace")
    try:
        error = json.loads(data).get("error", {})
        code, message = error.get("code", ""), error.get("message", message)
    except (ValueError, AttributeError):
        pass
    text = f"{what}: {status} {code}: {message}"
    if status == 429 or code == "rate_limited":
        retry = headers.get("retry-after", "")
        retry_ms = int(float(retry) * 1000) if retry.replace(".", "", 1).isdigit() else None
        return fail(t.ProvisionError_RateLimited(t.RateLimitedError(retry_ms, text)))
    if status in (401, 403) and code != "quota_exceeded":
        return fail(t.ProvisionError_Auth(text))
    if code == "quota_exceeded":
        return fail(t.ProvisionError_Quota(text))
    if status == 422 or code == "insufficient_capacity":
        return fail(t.ProvisionError_Capacity(t.CapacityError(t.CapacityScope.ZONE, text)))
    if status == 404:
        return fail(t.ProvisionError_NotFound(text))
    if status == 409:
        return fail(t.ProvisionError_Conflict(text))
    if status >= 500:
        return transport(text)
    return fail(t.ProvisionError_Other(text))


# --- nodes ------------------------------------------------------------------


def handle(node) -> t.NodeHandle:
    if not isinstance(node, dict) or not isinstance(node.get("id"), str):
        raise transport(f"the cloud answered a node without an id: {str(node)[:200]}")
    labels = node.get("labels") or {}
    status, join = STATES.get(node.get("state"), (t.NodeStatus.UNKNOWN, t.JoinState.PROVISIONING))
    address = node.get("address")
    return t.NodeHandle(
        provider_id=node["id"],
        status=status,
        raw_state=node.get("state"),
        created_at_ms=None,
        address=address,
        private_address=address,
        public_address=None,
        arch=None,
        gpu_model=None,
        zone=node.get("zone"),
        capacity_type=t.CapacityType.SPOT if node.get("capacity_type") == "spot" else t.CapacityType.ON_DEMAND,
        join_state=join,
        instance_type=node.get("type"),
        labels=sorted((str(k), str(v)) for k, v in labels.items()),
    )


def label_ok(s: str) -> bool:
    return 1 <= len(s) <= 63 and all(c in LABEL_CHARS for c in s)


def request_digest(request: t.ProvisionRequest) -> str:
    s, b = request.shape, request.boot
    parts = [s.cpu, s.memory_bytes, s.gpu, s.gpu_vendor, s.gpu_model, str(s.arch), s.disk_bytes,
             sorted(s.labels), s.zone, str(s.capacity_type), s.instance_type,
             b.image, b.user_data.hex() if b.user_data else None, b.ssh_keys]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


class Provisioner(exports.Provisioner):
    def __init__(self) -> None:
        self._config: Optional[Tuple[str, str]] = None

    def config(self) -> Tuple[str, str]:
        """The endpoint and token, read once per instance."""
        if self._config is None:
            try:
                endpoint = store.get("endpoint") or "https://api.refcloud.example/v1"
                token = store.get("token")
            except Err as e:
                raise fail(t.ProvisionError_InvalidConfig(f"reading config: {e.value}"))
            if not token:
                raise fail(t.ProvisionError_InvalidConfig("secret `token` is not set"))
            if not endpoint.startswith(("http://", "https://")):
                raise fail(t.ProvisionError_InvalidConfig(f"endpoint {endpoint!r} must be an http(s) URL"))
            self._config = (endpoint.rstrip("/"), token)
        return self._config

    def call(self, what: str, method, path: str, body=None, headers=None, ok=(200,)):
        endpoint, token = self.config()
        data = json.dumps(body).encode() if body is not None else None
        status, response_headers, answer = send(method, endpoint + path, token, data, headers)
        if status not in ok:
            raise classify(what, status, response_headers, answer)
        return status, answer

    def list_nodes(self, owner_id: str, request_id: Optional[str] = None) -> List[t.NodeHandle]:
        selector = f"{OWNER}={owner_id}" + (f",{REQUEST}={request_id}" if request_id else "")
        nodes, page = [], 1
        for _ in range(MAX_PAGES):
            path = f"/nodes?label_selector={quote(selector, safe='')}&page={page}&per_page={PER_PAGE}"
            _, data = self.call("list nodes", http.Method_Get(), path)
            answer = parse_json("list nodes", data)
            items = answer.get("nodes") if isinstance(answer, dict) else None
            if not isinstance(items, list):
                raise transport("list nodes: the answer has no `nodes` list")
            nodes.extend(handle(n) for n in items)
            page = answer.get("next_page")
            if page is None:
                break
            if not isinstance(page, int):
                raise transport(f"list nodes: `next_page` is {page!r}")
        # The cloud filters by label; check again, as the contract promises.
        return [n for n in nodes if (OWNER, owner_id) in n.labels
                and (request_id is None or (REQUEST, request_id) in n.labels)]

    def read(self, owner_id: str, provider_id: str) -> Optional[t.NodeHandle]:
        digits = provider_id[2:] if provider_id.startswith("n-") else ""
        if not digits.isdigit():
            return None
        try:
            _, data = self.call("get node", http.Method_Get(), f"/nodes/{provider_id}")
        except Err as e:
            if isinstance(e.value, t.ProvisionError_NotFound):
                return None
            raise
        answer = parse_json("get node", data)
        node = handle(answer.get("node") if isinstance(answer, dict) else None)
        return node if (OWNER, owner_id) in node.labels else None

    # --- the contract ---

    def name(self) -> str:
        return NAME

    def capacity_types(self) -> List[t.CapacityType]:
        return [t.CapacityType.ON_DEMAND, t.CapacityType.SPOT]

    def price_hint(self, shape: t.NodeShape) -> Optional[t.PriceEstimate]:
        try:
            name, price = pick(shape)
        except Err as e:
            if isinstance(e.value, (t.ProvisionError_Unsupported, t.ProvisionError_Capacity)):
                return None
            raise
        return t.PriceEstimate(price, shape.capacity_type, name)

    def provision(self, request: t.ProvisionRequest) -> t.NodeHandle:
        boot = request.boot
        if boot.image is not None or boot.user_data is not None or boot.ssh_keys:
            raise fail(t.ProvisionError_Unsupported(
                "the reference cloud takes no image, user data or SSH keys"))
        shape = request.shape
        labels = dict(shape.labels)
        digest = request_digest(request)
        labels.update({OWNER: request.owner_id, REQUEST: request.request_id, DIGEST: digest})
        for k, v in labels.items():
            if not (label_ok(k) and label_ok(v)):
                raise fail(t.ProvisionError_Unsupported(
                    f"label {k}={v} is outside the reference cloud's label syntax [A-Za-z0-9._/-]{{1,63}}"))
        for node in self.list_nodes(request.owner_id, request.request_id):
            if dict(node.labels).get(DIGEST) not in (None, digest):
                raise fail(t.ProvisionError_Conflict(
                    f"request {request.request_id} was first made with another shape or boot data (node {node.provider_id})"))
            return node
        node_type, _ = pick(shape)
        body = {
            "type": node_type,
            "zone": shape.zone or place(node_type),
            "capacity_type": capacity_text(shape.capacity_type),
            "labels": labels,
        }
        key = f"{request.owner_id}/{request.request_id}"[:255]
        _, data = self.call("create node", http.Method_Post(), "/nodes", body,
                            {"idempotency-key": key}, ok=(200, 201))
        answer = parse_json("create node", data)
        return handle(answer.get("node") if isinstance(answer, dict) else None)

    def terminate(self, owner_id: str, provider_id: str) -> None:
        if self.read(owner_id, provider_id) is None:
            raise fail(t.ProvisionError_NotFound(f"{provider_id} is not a node of {owner_id}"))
        self.call("delete node", http.Method_Delete(), f"/nodes/{provider_id}", ok=(200, 204))

    def describe(self, owner_id: str) -> List[t.NodeHandle]:
        return self.list_nodes(owner_id)

    def get(self, owner_id: str, provider_id: str) -> Optional[t.NodeHandle]:
        return self.read(owner_id, provider_id)

    def offerings(self) -> List[t.Offering]:
        return [
            t.Offering(name, cpu, gib * GIB, gpu, vendor, None, None, None, list(zones), on_demand, spot)
            for name, cpu, gib, gpu, vendor, on_demand, spot, zones in TYPES
        ]
