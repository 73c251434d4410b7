"""A provider, and the rules the export glue keeps for every provider
before and after it answers (the Rust SDK's `export_provider!` glue): ids
checked, capacity types offered, boot data refused rather than dropped, a
request id reused for another request refused as a conflict."""

from typing import List, Optional, Sequence

from . import tags
from .errors import Conflict, Unsupported
from .model import ON_DEMAND, BootSupport, NodeHandle, NodeShape, Offering, PriceHint, \
    ProvisionRequest


class Provider:
    """Subclass it, set `NAME` (and `BOOT`, `CAPACITY_TYPES` when they are
    not the defaults), and register it in `app.py` with
    `Provisioner = wasmprov_sdk.export(MyCloud)`. The instance is made at
    the first call of a plugin instance (read configuration in `__init__`);
    a failure there is not kept. Keep no state between calls: the cloud is
    the source of truth."""

    NAME = "unnamed"
    #: The boot fields `provision` honours; the glue refuses any other given.
    BOOT = BootSupport.NONE
    #: The capacity types really offered; the glue refuses any other.
    CAPACITY_TYPES: Sequence[str] = (ON_DEMAND,)

    def price_hint(self, shape: NodeShape) -> Optional[PriceHint]:
        """An estimate for `shape` naming the type priced (no I/O: the host allows none)."""
        raise NotImplementedError

    def provision(self, owner_id: str, request: ProvisionRequest) -> NodeHandle:
        """The node of `request` (tagged with `owner_id` and the request id):
        the one made for it already, else a new one."""
        raise NotImplementedError

    def terminate(self, owner_id: str, provider_id: str) -> None:
        """Terminates a node carrying `owner_id`; gone or not owned is `NotFound`."""
        raise NotImplementedError

    def describe(self, owner_id: str) -> List[NodeHandle]:
        """Every node tagged with `owner_id`, and no other."""
        raise NotImplementedError

    def get(self, owner_id: str, provider_id: str) -> Optional[NodeHandle]:
        """The node when it exists and carries `owner_id` (default: from `describe`)."""
        return next((n for n in self.describe(owner_id) if n.provider_id == provider_id), None)

    def offerings(self) -> List[Offering]:
        """Every instance type the provider can create."""
        raise Unsupported(f"{self.NAME} lists no offerings")


def offers_capacity(cls, shape: NodeShape) -> None:
    """`Unsupported` when the provider does not offer the shape's capacity type."""
    if shape.capacity_type not in cls.CAPACITY_TYPES:
        raise Unsupported(f"{cls.NAME} offers no {shape.capacity_type} capacity "
                          f"(it offers {', '.join(cls.CAPACITY_TYPES)})")


def checked_provision(provider: Provider, owner_id: str, request: ProvisionRequest) -> NodeHandle:
    """`provider.provision` under the contract's rules."""
    tags.check_owner_id(owner_id)
    tags.check_request_id(request.request_id)
    offers_capacity(type(provider), request.shape)
    refused = provider.BOOT.refused(request.boot)
    if refused:
        raise Unsupported(f"{provider.NAME} cannot honour boot data: {', '.join(refused)}")
    node = provider.provision(owner_id, request)
    digest = tags.request_digest(request)
    found = node.labels.get(tags.REQUEST_DIGEST)
    if found is not None and found != digest:
        raise Conflict(f"request id {request.request_id!r} was used for another request (node "
                       f"{node.provider_id} was made for shape and boot data with digest "
                       f"{found}; this request's is {digest}); choose a new request id")
    return node


def checked_price_hint(provider: Provider, shape: NodeShape) -> Optional[PriceHint]:
    offers_capacity(type(provider), shape)
    return provider.price_hint(shape)


def checked_owner(owner_id: str) -> None:
    tags.check_owner_id(owner_id)
