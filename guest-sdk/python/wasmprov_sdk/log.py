"""Log records, to the host's log tagged with the plugin's name
(`wasmprov_guest::log`); natively, in a plugin's unit tests, to standard error."""

import sys
from typing import Sequence, Tuple


def _emit(level: str, message: str, fields: Sequence[Tuple[str, str]] = ()) -> None:
    try:
        from wit_world.imports import wasmprov_provisioner_log as wit_log
    except ImportError:
        print(f"{level.upper()} {message} {list(fields)}", file=sys.stderr)
        return
    wit_log.log(getattr(wit_log.Level, level.upper()), message, list(fields))


def info(message: str) -> None:
    """An `info` record."""
    _emit("info", message)


def warn(message: str) -> None:
    """A `warn` record."""
    _emit("warn", message)


def error(message: str) -> None:
    """An `error` record."""
    _emit("error", message)
