"""Configuration values and secrets through `wasi:config/store`: the host
gives a plugin only its manifest's `[config]` values and `[secrets]`.
Errors are `InvalidConfig` naming the key (`wasmprov_guest::config`)."""

from typing import Callable, Optional

from .errors import InvalidConfig


def _store_get(key: str) -> Optional[str]:
    from componentize_py_types import Err
    from wit_world.imports import store
    try:
        return store.get(key)
    except Err as e:
        raise InvalidConfig(f"reading config key {key!r}: {e.value}")


#: How values are read: the host's store in a plugin; a test may replace it.
reader: Callable[[str], Optional[str]] = _store_get


def get(key: str) -> Optional[str]:
    """The value of `key`, or None when the manifest does not set it."""
    return reader(key)


def require(key: str) -> str:
    """The value of `key`, which must be set and not empty."""
    value = get(key)
    if not value:
        raise InvalidConfig(f"config key {key!r} is required; set it in the plugin's manifest")
    return value


def url_or(key: str, default: str) -> str:
    """The http(s) URL at `key` (or `default`), without a trailing `/`."""
    url = (get(key) or default).strip().rstrip("/")
    scheme, sep, rest = url.partition("://")
    host = rest.split("/")[0].split("?")[0].split("#")[0]
    if not sep or scheme not in ("http", "https") or not host or any(c.isspace() for c in url):
        raise InvalidConfig(f"config key {key!r} must be an http:// or https:// URL with a "
                            f"host, not {url!r}")
    return url


class Secret:
    """A secret that `repr` never shows; unset is an error only when used."""

    def __init__(self, key: str, value: Optional[str]) -> None:
        self.key, self._value = key, value

    def expose(self) -> str:
        if self._value is None:
            raise InvalidConfig(f"secret {self.key!r} is not set; set it where the manifest's "
                                "[secrets] read it from")
        return self._value

    def __repr__(self) -> str:
        return f"{self.key}=<{'redacted' if self._value is not None else 'unset'}>"


def secret(key: str) -> Secret:
    """The secret at `key` (trimmed; empty is unset)."""
    value = (get(key) or "").strip()
    return Secret(key, value or None)
