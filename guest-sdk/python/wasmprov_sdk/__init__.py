"""Write a wasmprov provisioner plugin in Python, built into a component by
componentize-py against the `wasmprov:provisioner/provider@0.2.0` world.

Subclass `Provider` (or `RestCloud` for a plain REST cloud, which then does
provision, terminate, describe and get itself), and export it from `app.py`:

    from wasmprov_sdk import RestCloud, export
    class MyCloud(RestCloud): ...
    Provisioner = export(MyCloud)

The export glue keeps the contract's rules for every provider, as the Rust
SDK's does: owner and request ids checked, capacity types offered, boot
data a provider does not honour refused (never dropped), a request id
reused for another request refused. Modules: `http` (JSON over the host's
`wasi:http`), `pages` (every way a list pages), `classify` (error answers
to contract errors), `tags` (ids and labels, byte for byte as the Rust
SDK), `shape` (cheapest fitting type), `config`, `time`, `boot`, `random`
(passwords), `log`.
Everything but `http.send`, `config`'s store and the glue is plain Python
with no bindings, and is unit tested as such."""

from . import boot, classify, config, http, log, pages, random, shape, tags, time
from .classify import Rule
from .errors import (Auth, Capacity, Conflict, Error, InvalidConfig, NotFound, Other, Quota,
                     RateLimited, Transport, Unsupported)
from .http import Request, Response
from .model import (ARM64, GIB, ON_DEMAND, SPOT, X86_64, BootData, BootSupport, NodeHandle,
                    NodeShape, Offering, PriceHint, ProvisionRequest, StateTable)
from .provider import Provider
from .rest import RestCloud

#: The contract version the SDK builds plugins for.
CONTRACT_VERSION = "0.2.0"
#: The world a plugin is built against.
WORLD = "wasmprov:provisioner/provider@0.2.0"


def export(cls):
    """The `Provisioner` class componentize-py exports, driving provider
    class `cls` (assign it to `Provisioner` in `app.py`)."""
    from . import _wit
    return _wit.make(cls)
