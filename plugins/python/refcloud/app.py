"""A wasmprov provisioner plugin for the reference cloud, in Python, on the
Python SDK (`wasmprov_sdk`, in `guest-sdk/python`).

Built with componentize-py against wasmprov's WIT (world
`wasmprov:provisioner/provider@0.2.0`); it runs under the same sandbox,
grants and limits as a Rust plugin. The reference cloud is the small node
API of `host/fake/src/refcloud` (the fake is its specification).

The SDK's `RestCloud` keeps the contract every plugin keeps, which the
conformance suite checks: nodes carry the owner and request-id labels (the
cloud is the source of truth); provision looks for the request's node
before it creates one; describe returns this owner's nodes only, across
every page; terminate and get never touch another owner's node; errors are
the variant a caller acts on. What is left here is the reference cloud:
its catalogue, its node JSON and its endpoints.
"""

from wasmprov_sdk import (GIB, ON_DEMAND, SPOT, NodeHandle, PriceHint, Request, RestCloud, Rule,
                          StateTable, config, export, pages, shape, tags, time)

ZONES = ["zone-a", "zone-b"]
# The catalogue; prices come from here so that price_hint needs no I/O.
TYPES = [
    shape.InstanceType("small", 2.0, 4 * GIB, 0.020, spot=0.008, zones=ZONES),
    shape.InstanceType("medium", 4.0, 8 * GIB, 0.040, spot=0.016, zones=ZONES),
    shape.InstanceType("large", 8.0, 32 * GIB, 0.160, spot=0.064, zones=ZONES),
    shape.InstanceType("gpu", 8.0, 64 * GIB, 1.100, gpu=1, gpu_vendor="nvidia", zones=["zone-b"]),
]
STATES = StateTable({
    "provisioning": ("pending", "provisioning"),
    "running": ("running", "joining"),
    "deleting": ("deleting", "failed"),
})
# Label keys and values as the cloud stores them: [A-Za-z0-9._-], others escaped.
LABELS = tags.LABEL_VALUE


class RefCloud(RestCloud):
    NAME = "refcloud-py"
    CAPACITY_TYPES = (ON_DEMAND, SPOT)
    CLOUD = "refcloud"
    PAGING = pages.Numbers(page="page", size=100, next="/next_page", items="/nodes")
    LIST_ITEMS, ONE_ITEM = "/nodes", "/node"
    ERRORS = (Rule(403, "quota", "quota"), Rule(422, "capacity", "capacity_in_zone"))

    def __init__(self) -> None:
        self.endpoint = config.url_or("endpoint", "https://api.refcloud.example/v1")
        self.token = config.secret("token")

    def authorize(self, request: Request) -> Request:
        return request.bearer(self.token.expose())

    def list(self, owner_id, request_id):
        selector = f"{tags.OWNER}={owner_id}"
        if request_id is not None:
            selector += f",{tags.REQUEST}={request_id}"
        return Request.get(f"{self.endpoint}/nodes?per_page=100").query("label_selector", selector)

    def node_url(self, id):
        digits = id[2:] if id.startswith("n-") else ""
        return f"{self.endpoint}/nodes/{id}" if digits.isdigit() else None

    def create(self, request, labels):
        node_type, _ = shape.pick(request.shape, TYPES)
        return Request.post(f"{self.endpoint}/nodes").header(
            "idempotency-key", tags.pair_token(labels[tags.OWNER], request.request_id, 255),
        ).json({
            "type": node_type.name,
            "zone": request.shape.zone or node_type.zones[0],
            "capacity_type": "spot" if request.shape.capacity_type == SPOT else "on-demand",
            "labels": {LABELS.encode(k): LABELS.encode(v) for k, v in labels.items()},
        })

    def handle(self, n):
        def decode(s):
            return s if LABELS.decode(s) is None else LABELS.decode(s)
        return STATES.apply(n.get("state"), NodeHandle(
            n["id"], zone=n.get("zone"), instance_type=n.get("type"),
            capacity_type=SPOT if n.get("capacity_type") == "spot" else ON_DEMAND,
            address=n.get("address"), private_address=n.get("address"),
            created_at_ms=time.rfc3339_ms(n.get("created")),
            labels={decode(k): decode(v) for k, v in (n.get("labels") or {}).items()}))

    def price_hint(self, shape_):
        node_type, price = shape.pick(shape_, TYPES)
        return PriceHint(price, shape_.capacity_type, node_type.name)

    def offerings(self):
        return shape.offerings(TYPES)


Provisioner = export(RefCloud)
