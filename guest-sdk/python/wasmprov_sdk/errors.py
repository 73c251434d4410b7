"""The contract's errors, as exceptions a plugin raises and the export glue
turns into the `provision-error` variant. Each kind says what the caller
should do next, as in the Rust SDK (`wasmprov_guest::Error`)."""

from typing import Optional

#: Every kind, as the host names them.
KINDS = ("unsupported", "capacity", "quota", "rate_limited", "not_found", "auth",
         "transport", "invalid_config", "conflict", "other")
#: Capacity scopes.
SCOPES = ("instance_type", "zone", "group")


class Error(Exception):
    """A contract error: `kind` (one of `KINDS`) and a message. A capacity
    error names its `scope`; a rate limit may carry `retry_after_ms`."""

    kind = "other"

    def __init__(self, message: str, *, scope: str = "instance_type",
                 retry_after_ms: Optional[int] = None) -> None:
        super().__init__(message)
        self.message = message
        self.scope = scope
        self.retry_after_ms = retry_after_ms

    @property
    def retryable(self) -> bool:
        """Whether the caller may try again as it is (later, or elsewhere):
        the host retries these; a plugin never retries inside one call."""
        return self.kind in ("capacity", "rate_limited", "transport")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class Unsupported(Error):
    """The request cannot be done as asked (a shape, id or boot field)."""
    kind = "unsupported"


class Capacity(Error):
    """The cloud has no capacity: `scope` says what ran out."""
    kind = "capacity"


class Quota(Error):
    """An account limit."""
    kind = "quota"


class RateLimited(Error):
    """Throttled; `retry_after_ms` is how long the cloud asked to wait."""
    kind = "rate_limited"


class NotFound(Error):
    """No such node (or not this owner's)."""
    kind = "not_found"


class Auth(Error):
    """Credentials missing or not allowed."""
    kind = "auth"


class Transport(Error):
    """The cloud or the way to it failed; retryable."""
    kind = "transport"


class InvalidConfig(Error):
    """The plugin's configuration or the host's grants are wrong."""
    kind = "invalid_config"


class Conflict(Error):
    """Conflicts with what exists (a request id reused for another request)."""
    kind = "conflict"


class Other(Error):
    """Anything else."""
    kind = "other"


_BY_KIND = {c.kind: c for c in (Unsupported, Capacity, Quota, RateLimited, NotFound, Auth,
                                Transport, InvalidConfig, Conflict, Other)}


def error(kind: str, message: str, **kw) -> Error:
    """The error of `kind` (`"capacity_in_zone"` is a zone-scoped capacity error)."""
    if kind == "capacity_in_zone":
        return Capacity(message, scope="zone")
    return _BY_KIND[kind](message, **kw)
