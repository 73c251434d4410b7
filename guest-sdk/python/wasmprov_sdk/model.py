"""The contract's values as plain Python: what a provider receives and
returns. The export glue converts them from and to the generated WIT
bindings, so a provider (and its tests) never touch those."""

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

ON_DEMAND, SPOT = "on_demand", "spot"
X86_64, ARM64 = "x86_64", "arm64"
#: Node statuses, as `NodeHandle.status` takes them.
STATUSES = ("pending", "running", "stopping", "stopped", "suspending", "suspended",
            "deleting", "deleted", "repairing", "unknown")
#: Join states, as `NodeHandle.join_state` takes them.
JOIN_STATES = ("provisioning", "booting", "joining", "joined", "failed")
GIB = 1 << 30


@dataclass
class NodeShape:
    """What the caller wants a node to look like (`wasmprov_api::NodeShape`)."""
    cpu: float = 1.0
    memory_bytes: int = GIB
    gpu: int = 0
    gpu_vendor: Optional[str] = None
    gpu_model: Optional[str] = None
    arch: Optional[str] = None
    disk_bytes: Optional[int] = None
    labels: Dict[str, str] = field(default_factory=dict)
    zone: Optional[str] = None
    capacity_type: str = ON_DEMAND
    instance_type: Optional[str] = None


@dataclass
class BootData:
    """What a node boots with; a field given must be honoured or refused."""
    image: Optional[str] = None
    user_data: Optional[bytes] = None
    ssh_keys: List[str] = field(default_factory=list)

    def given(self) -> List[str]:
        """The fields given, by name."""
        return [n for n, v in (("image", self.image is not None),
                               ("user_data", self.user_data is not None),
                               ("ssh_keys", bool(self.ssh_keys))) if v]


@dataclass
class ProvisionRequest:
    """A request for one node."""
    request_id: str
    shape: NodeShape = field(default_factory=NodeShape)
    boot: BootData = field(default_factory=BootData)


@dataclass
class NodeHandle:
    """A node as a provider reports it; `labels` are the node's labels, decoded."""
    provider_id: str
    status: str = "unknown"
    raw_state: Optional[str] = None
    created_at_ms: Optional[int] = None
    address: Optional[str] = None
    private_address: Optional[str] = None
    public_address: Optional[str] = None
    arch: Optional[str] = None
    gpu_model: Optional[str] = None
    zone: Optional[str] = None
    capacity_type: str = ON_DEMAND
    join_state: str = "provisioning"
    instance_type: Optional[str] = None
    labels: Dict[str, str] = field(default_factory=dict)


@dataclass
class PriceHint:
    """An estimate for a shape, naming the type priced."""
    hourly_usd: float
    capacity_type: str
    instance_type: str


@dataclass
class Offering:
    """One instance type the provider can create."""
    instance_type: str
    cpu: float
    memory_bytes: int
    gpu: int = 0
    gpu_vendor: Optional[str] = None
    gpu_model: Optional[str] = None
    arch: Optional[str] = None
    disk_bytes: Optional[int] = None
    zones: List[str] = field(default_factory=list)
    on_demand_usd: Optional[float] = None
    spot_usd: Optional[float] = None


@dataclass(frozen=True)
class BootSupport:
    """Which boot fields a provider honours; the export glue refuses a
    request giving any other, so boot data is never dropped silently."""
    image: bool = False
    user_data: bool = False
    ssh_keys: bool = False

    def refused(self, boot: BootData) -> List[str]:
        """The fields `boot` gives that are not supported."""
        return [f for f in boot.given() if not getattr(self, f)]


BootSupport.NONE = BootSupport()
BootSupport.ALL = BootSupport(True, True, True)
BootSupport.IMAGE_AND_USER_DATA = BootSupport(True, True, False)


class StateTable:
    """A cloud's state names mapped to (status, join state), with a default
    for names it does not list (`wasmprov_guest::state::StateTable`)."""

    def __init__(self, states: Dict[str, Tuple[str, str]],
                 default: Tuple[str, str] = ("unknown", "provisioning")) -> None:
        self.states = {k.lower(): v for k, v in states.items()}
        self.default = default

    def lookup(self, name: Optional[str]) -> Tuple[str, str]:
        """The status and join state of `name` (trimmed, ignoring case)."""
        return self.states.get((name or "").strip().lower(), self.default)

    def apply(self, name: Optional[str], node: NodeHandle) -> NodeHandle:
        """Sets the node's status, join state and raw state from `name`."""
        node.status, node.join_state = self.lookup(name)
        node.raw_state = None if name is None else name.strip()
        return node
