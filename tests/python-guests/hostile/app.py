"""A hostile plugin in Python: `provision` of request `attack` runs the
attack its config names (`attack = "http" | "file" | "env" | "cpu" |
"memory"`) and reports what it saw in the node's labels; request `normal`
answers a plain node, so a test can check the plugin still works after.
"""

import json
import os
from typing import List, Optional

from componentize_py_types import Err, Ok
from wit_world import exports
from wit_world.imports import outgoing_handler, store
from wit_world.imports import wasi_http_types as http
from wit_world.imports import wasmprov_provisioner_types as t


def node(provider_id: str, labels) -> t.NodeHandle:
    return t.NodeHandle(
        provider_id, t.NodeStatus.RUNNING, None, None, None, None, None, None, None, None,
        t.CapacityType.ON_DEMAND, t.JoinState.JOINING, None, sorted(labels.items()))


def try_http(url_authority: str) -> str:
    request = http.OutgoingRequest(http.Fields())
    request.set_scheme(http.Scheme_Https())
    request.set_authority(url_authority)
    request.set_path_with_query("/")
    try:
        future = outgoing_handler.handle(request, None)
    except Err as e:
        return f"refused: {e.value}"
    with future.subscribe() as ready:
        ready.block()
    answer = future.get()
    if isinstance(answer, Ok) and isinstance(answer.value, Ok):
        return f"GOT {answer.value.value.status()}"
    return f"failed: {answer}"


def attack(kind: str) -> dict:
    if kind == "http":
        return {"try example.com": try_http("example.com"), "try 127.0.0.1": try_http("127.0.0.1:9")}
    if kind == "file":
        seen = {}
        for path in ["/etc/passwd", "/proc/self/environ", ".", "/"]:
            try:
                if path in (".", "/"):
                    seen[f"try {path}"] = "LISTED " + ",".join(os.listdir(path))[:200]
                else:
                    with open(path) as f:
                        seen[f"try {path}"] = "READ " + f.read(200)
            except Exception as e:  # the point is what the sandbox answers
                seen[f"try {path}"] = f"refused: {type(e).__name__}: {e}"
        return seen
    if kind == "env":
        return {"environ": json.dumps(dict(os.environ)), "cwd": repr(os.getcwd() if hasattr(os, "getcwd") else None)}
    if kind == "cpu":
        n = 0
        while True:
            n += 1
    if kind == "memory":
        hoard = []
        while True:
            hoard.append(bytearray(4 << 20))
    raise Err(t.ProvisionError_InvalidConfig(f"unknown attack {kind!r}"))


class Provisioner(exports.Provisioner):
    def name(self) -> str:
        return "hostile-python"

    def capacity_types(self) -> List[t.CapacityType]:
        return [t.CapacityType.ON_DEMAND]

    def price_hint(self, shape: t.NodeShape) -> Optional[t.PriceEstimate]:
        return t.PriceEstimate(0.01, t.CapacityType.ON_DEMAND, "tiny")

    def provision(self, request: t.ProvisionRequest) -> t.NodeHandle:
        if request.request_id == "normal":
            return node("normal", {"path": "normal"})
        return node("attack", attack(store.get("attack") or ""))

    def terminate(self, owner_id: str, provider_id: str) -> None:
        raise Err(t.ProvisionError_NotFound(provider_id))

    def describe(self, owner_id: str) -> List[t.NodeHandle]:
        return []

    def get(self, owner_id: str, provider_id: str) -> Optional[t.NodeHandle]:
        return None

    def offerings(self) -> List[t.Offering]:
        return []
