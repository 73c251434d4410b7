"""The export glue: the generated bindings' types to and from the SDK's,
and the `provisioner` export driving a `Provider` under the contract's
rules (`provider.checked_*`). Imported only inside a component."""

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import wasmprov_provisioner_types as t
# componentize-py keeps the bindings of the interfaces imported while it
# builds (pre-initializes) the component: import here what `http.send` and
# `config` import when called.
from wit_world.imports import outgoing_handler, store, streams, wasi_http_types  # noqa: F401

from . import provider as rules
from .errors import Error
from .model import BootData, NodeShape, ProvisionRequest

_CAPACITY = {"on_demand": t.CapacityType.ON_DEMAND, "spot": t.CapacityType.SPOT}
_ARCH = {"x86_64": t.Arch.X86_64, "arm64": t.Arch.ARM64}
_SCOPE = {"instance_type": t.CapacityScope.INSTANCE_TYPE, "zone": t.CapacityScope.ZONE,
          "group": t.CapacityScope.GROUP}
_PLAIN = {"unsupported": t.ProvisionError_Unsupported, "quota": t.ProvisionError_Quota,
          "not_found": t.ProvisionError_NotFound, "auth": t.ProvisionError_Auth,
          "transport": t.ProvisionError_Transport,
          "invalid_config": t.ProvisionError_InvalidConfig,
          "conflict": t.ProvisionError_Conflict, "other": t.ProvisionError_Other}


def _back(table, value):
    return next(k for k, v in table.items() if v == value)


def shape_in(s) -> NodeShape:
    return NodeShape(s.cpu, s.memory_bytes, s.gpu, s.gpu_vendor, s.gpu_model,
                     None if s.arch is None else _back(_ARCH, s.arch), s.disk_bytes,
                     dict(s.labels), s.zone, _back(_CAPACITY, s.capacity_type), s.instance_type)


def handle_out(n) -> "t.NodeHandle":
    return t.NodeHandle(
        n.provider_id, t.NodeStatus[n.status.upper()], n.raw_state, n.created_at_ms, n.address,
        n.private_address, n.public_address, None if n.arch is None else _ARCH[n.arch],
        n.gpu_model, n.zone, _CAPACITY[n.capacity_type], t.JoinState[n.join_state.upper()],
        n.instance_type, sorted((str(k), str(v)) for k, v in n.labels.items()))


def error_out(e: Error) -> Err:
    if e.kind == "capacity":
        return Err(t.ProvisionError_Capacity(t.CapacityError(_SCOPE[e.scope], e.message)))
    if e.kind == "rate_limited":
        return Err(t.ProvisionError_RateLimited(t.RateLimitedError(e.retry_after_ms, e.message)))
    return Err(_PLAIN[e.kind](e.message))


def make(cls):
    """The `Provisioner` export class for provider class `cls`."""
    made = []

    def instance():
        # One provider per plugin instance, made at its first call; a
        # failed construction is not kept.
        if not made:
            made.append(cls())
        return made[0]

    def guarded(f):
        def call(*args):
            try:
                return f(*args)
            except Error as e:
                # The contract's variant. Any other exception is a bug of
                # the plugin and traps, as a panic does in Rust.
                raise error_out(e)
        return call

    class Provisioner(exports.Provisioner):
        def name(self) -> str:
            return cls.NAME

        def capacity_types(self):
            return [_CAPACITY[c] for c in cls.CAPACITY_TYPES]

        @guarded
        def price_hint(self, shape):
            hint = rules.checked_price_hint(instance(), shape_in(shape))
            return None if hint is None else t.PriceEstimate(
                hint.hourly_usd, _CAPACITY[hint.capacity_type], hint.instance_type)

        @guarded
        def provision(self, request):
            boot = BootData(request.boot.image, request.boot.user_data, list(request.boot.ssh_keys))
            req = ProvisionRequest(request.request_id, shape_in(request.shape), boot)
            return handle_out(rules.checked_provision(instance(), request.owner_id, req))

        @guarded
        def terminate(self, owner_id, provider_id):
            rules.checked_owner(owner_id)
            instance().terminate(owner_id, provider_id)

        @guarded
        def describe(self, owner_id):
            rules.checked_owner(owner_id)
            return [handle_out(n) for n in instance().describe(owner_id)]

        @guarded
        def get(self, owner_id, provider_id):
            rules.checked_owner(owner_id)
            node = instance().get(owner_id, provider_id)
            return None if node is None else handle_out(node)

        @guarded
        def offerings(self):
            return [t.Offering(o.instance_type, o.cpu, o.memory_bytes, o.gpu, o.gpu_vendor,
                               o.gpu_model, None if o.arch is None else _ARCH[o.arch],
                               o.disk_bytes, list(o.zones), o.on_demand_usd, o.spot_usd)
                    for o in instance().offerings()]

    return Provisioner
