"""A shape to the cheapest instance type that satisfies it, by the
contract's one rule (`wasmprov_api::fit`, as `wasmprov_guest::shape`): an
explicit instance type wins over CPU, memory and GPUs (and must exist);
otherwise the cheapest type with at least what is asked, of the GPU vendor
asked, in the zone asked. Architecture, GPU model and disk bind either
way: a type that does not say it has them does not match."""

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from .errors import Capacity, Unsupported
from .model import SPOT, NodeShape, Offering


@dataclass
class InstanceType:
    """One catalogue entry. `prices`: zone → on-demand $/h (empty: offered
    everywhere at `price`); `spot`: $/h as spot, None when not sold so."""
    name: str
    cpu: float
    memory_bytes: int
    price: float
    gpu: int = 0
    gpu_vendor: Optional[str] = None
    gpu_model: Optional[str] = None
    arch: Optional[str] = None
    disk_bytes: Optional[int] = None
    spot: Optional[float] = None
    zones: Sequence[str] = field(default_factory=list)

    def price_in(self, zone: Optional[str], capacity_type: str) -> Optional[float]:
        """The hourly price as `capacity_type` in `zone`, or None when not offered."""
        if zone is not None and self.zones and zone not in self.zones:
            return None
        return self.spot if capacity_type == SPOT else self.price

    def bound(self, shape: NodeShape) -> bool:
        """Architecture, GPU model and disk: what even an explicit type must have."""
        arch_ok = shape.arch is None or self.arch == shape.arch
        model_ok = shape.gpu_model is None or (
            self.gpu_model is not None and self.gpu_model.lower() == shape.gpu_model.lower())
        disk_ok = shape.disk_bytes is None or (
            self.disk_bytes is not None and self.disk_bytes >= shape.disk_bytes)
        return arch_ok and model_ok and disk_ok

    def fits(self, shape: NodeShape) -> bool:
        """Whether the type has what the shape asks for (zone aside)."""
        vendor_ok = shape.gpu == 0 or shape.gpu_vendor is None or (
            self.gpu_vendor is not None and self.gpu_vendor.lower() == shape.gpu_vendor.lower())
        return (self.cpu + 1e-9 >= shape.cpu and self.memory_bytes >= shape.memory_bytes
                and self.gpu >= shape.gpu and vendor_ok and self.bound(shape))

    def offering(self) -> Offering:
        return Offering(self.name, self.cpu, self.memory_bytes, self.gpu,
                        self.gpu_vendor.lower() if self.gpu_vendor else None,
                        self.gpu_model.lower() if self.gpu_model else None,
                        self.arch, self.disk_bytes, list(self.zones), self.price, self.spot)


def pick(shape: NodeShape, catalogue: Sequence[InstanceType]) -> Tuple[InstanceType, float]:
    """The cheapest type for `shape` (ties by name) and its price as the
    shape's capacity type; `Unsupported` when none fits, `Capacity` (zone)
    when none that fits is sold there or so."""
    zone, capacity = shape.zone, shape.capacity_type
    if shape.instance_type is not None:
        t = next((t for t in catalogue if t.name == shape.instance_type), None)
        if t is None:
            raise Unsupported(f"instance type {shape.instance_type!r} does not exist")
        if not t.bound(shape):
            raise Unsupported(f"instance type {shape.instance_type!r} lacks the "
                              "architecture, GPU model or disk asked for")
        price = t.price_in(zone, capacity)
        if price is None:
            raise Capacity(f"instance type {t.name!r} is not offered as {capacity} in "
                           f"{zone or 'any zone'}", scope="zone")
        return t, price
    fitting = [t for t in catalogue if t.fits(shape)]
    priced = sorted((p, t.name, t) for t in fitting
                    if (p := t.price_in(zone, capacity)) is not None)
    if priced:
        return priced[0][2], priced[0][0]
    if not fitting:
        raise Unsupported(f"no instance type has {shape.cpu} vCPU, {shape.memory_bytes >> 20} "
                          f"MiB and {shape.gpu} GPU")
    raise Capacity(f"no instance type big enough is offered as {capacity} in "
                   f"{zone or 'any zone'}", scope="zone")


def offerings(catalogue: Sequence[InstanceType]) -> List[Offering]:
    """The contract's `offerings` answer: one offering per entry, in order."""
    return [t.offering() for t in catalogue]
