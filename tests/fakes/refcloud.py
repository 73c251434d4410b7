#!/usr/bin/env python3
"""A fake of the reference cloud's node API (the one `wasmprov new` plugins
talk to), written with nothing but Python's standard library, that speaks
wasmprov's fake-control protocol (docs/FAKE-PROTOCOL.md): the conformance
suite starts it with `--fake-command`, reads its URL from the first line of
its output, and checks the plugin against what this process holds.

    python3 refcloud.py [--forget]

--forget answers the protocol's node list with no nodes: a fake that cannot
see what the plugin made, for the suite's own tests.
"""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

TOKEN = "py-fake-token"
TYPES = {"small": "zone-a", "medium": "zone-a", "large": "zone-a", "gpu": "zone-b"}
FORGET = "--forget" in sys.argv[1:]
lock = threading.Lock()
nodes = {}  # id -> node
next_id = [0]


def error(status, code, message, headers=None):
    return status, {"error": {"code": code, "message": message}}, headers or {}


INFO = {
    "name": "refcloud fake (python)",
    "secrets": {"*": TOKEN},
    "creates": [{"method": "POST", "path": "/v1/nodes"}],
    "faults": {
        name: {"status": s, "headers": h, "body": json.dumps(b)}
        for name, (s, b, h) in {
            "capacity": error(422, "insufficient_capacity", "insufficient capacity for node type small in zone zone-a"),
            "quota": error(403, "quota_exceeded", "node quota of 1000 reached"),
            "rate_limited": error(429, "rate_limited", "too many requests", {"retry-after": "1"}),
        }.items()
    },
}


def create(body, labels):
    next_id[0] += 1
    node = {"id": "n-%06d" % next_id[0], "type": body.get("type", "small"),
            "zone": body.get("zone") or TYPES.get(body.get("type"), "zone-a"),
            "capacity_type": body.get("capacity_type", "on-demand"), "state": "provisioning",
            "address": "10.9.0.%d" % (next_id[0] % 250 + 1), "labels": labels}
    nodes[node["id"]] = node
    return node


def shown(node):
    out = dict(node)
    node["state"] = "running"  # the first read still shows provisioning
    return out


def handle(method, path, query, body, auth):
    if path == "/_wasmprov/info":
        return 200, INFO, {}
    if path == "/_wasmprov/nodes":
        listed = [] if FORGET else [{"id": n["id"], "labels": n["labels"]} for n in nodes.values()]
        return 200, {"nodes": listed}, {}
    if path == "/_wasmprov/plant" and method == "POST":
        return 200, {"id": create({}, body.get("labels", {}))["id"]}, {}
    if auth != "Bearer " + TOKEN:
        return error(401, "unauthorized", "missing or wrong token")
    if path == "/v1/nodes" and method == "GET":
        terms = [t.split("=", 1) for t in query.get("label_selector", [""])[0].split(",") if t]
        page, per_page = int(query.get("page", ["1"])[0]), int(query.get("per_page", ["25"])[0])
        if page < 1 or not 1 <= per_page <= 100 or any(len(t) != 2 for t in terms):
            return error(400, "invalid_request", "bad page, per_page or label_selector")
        match = [n for n in nodes.values() if all(n["labels"].get(k) == v for k, v in terms)]
        items = match[(page - 1) * per_page: page * per_page]
        more = page * per_page < len(match)
        return 200, {"nodes": [shown(n) for n in items], "next_page": page + 1 if more else None}, {}
    if path == "/v1/nodes" and method == "POST":
        if body.get("type") not in TYPES:
            return error(400, "invalid_request", "unknown type %r" % body.get("type"))
        return 201, {"node": create(body, body.get("labels", {}))}, {}
    if path.startswith("/v1/nodes/"):
        node = nodes.get(path[len("/v1/nodes/"):])
        if node is None:
            return error(404, "not_found", "no node " + path)
        if method == "GET":
            return 200, {"node": shown(node)}, {}
        if method == "DELETE":
            del nodes[node["id"]]
            return 204, None, {}
    return error(404, "not_found", "no route %s %s" % (method, path))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def serve(self):
        url = urlsplit(self.path)
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            status, answer, headers = error(400, "invalid_request", "body is not JSON")
        else:
            with lock:
                status, answer, headers = handle(self.command, url.path, parse_qs(url.query),
                                                 body, self.headers.get("authorization"))
        data = b"" if answer is None else json.dumps(answer).encode()
        self.send_response(status)
        for k, v in {"content-type": "application/json", **headers}.items():
            self.send_header(k, v)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = serve

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print("http://127.0.0.1:%d" % server.server_address[1], flush=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
sys.stdin.read()  # until the suite that started us closes our input
