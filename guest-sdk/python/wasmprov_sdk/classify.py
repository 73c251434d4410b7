"""What an error answer of a cloud's API means: the contract error from the
status and the error body, with a plugin's rules checked first
(`wasmprov_guest::classify`, the same defaults and message)."""

import json
from typing import Iterable, NamedTuple, Optional, Tuple

from . import pointer
from .errors import Error, error

#: The rule kinds: the contract's kinds, with capacity split by scope.
KINDS = ("capacity", "capacity_in_zone", "quota", "rate_limited", "not_found", "auth",
         "invalid_config", "unsupported", "conflict", "transport", "other")


class Rule(NamedTuple):
    """An answer with this status (any when None) whose message contains
    `contains` (ignoring case; empty matches any) is `kind`."""
    status: Optional[int]
    contains: str
    kind: str

    def matches(self, status: int, text: str) -> bool:
        return ((self.status is None or self.status == status)
                and (not self.contains or self.contains.lower() in text.lower()))


def default_kind(status: int) -> str:
    """The kind of an error answer no rule matches."""
    if status in (401, 403):
        return "auth"
    if status in (404, 410):
        return "not_found"
    if status == 409:
        return "conflict"
    if status == 429:
        return "rate_limited"
    if status >= 500:
        return "transport"
    return "unsupported"


MESSAGE_POINTERS = ("/message", "/error/message", "/error_description", "/error",
                    "/errors/0/message")
CODE_POINTERS = ("/error/code", "/code", "/id", "/errors/0/code")


class ErrorAt(NamedTuple):
    """Where a cloud's error answers hold the message and the code (JSON
    pointers, first string found wins): `ErrorAt.DEFAULT`, or a cloud's own
    (Linode: `ErrorAt(("/errors/0/reason",), ("/errors/0/field",))`)."""
    message: Tuple[str, ...]
    code: Tuple[str, ...]


ErrorAt.DEFAULT = ErrorAt(MESSAGE_POINTERS, CODE_POINTERS)


def error_message(body: bytes, messages=MESSAGE_POINTERS, codes=CODE_POINTERS) -> str:
    """The message of an error body: the first string at `messages` (with
    the first string at `codes` in front), else the body's text; at most
    300 characters."""
    text = body.decode(errors="replace")
    try:
        doc = json.loads(body)
    except ValueError:
        return _cut(text.strip())

    def first(pointers) -> Optional[str]:
        return next((v for v in (pointer.get(doc, p) for p in pointers) if isinstance(v, str)),
                    None)

    message, code = first(messages), first(codes)
    if code is not None and message is not None:
        return _cut(f"{code}: {message}")
    return _cut(message if message is not None else code if code is not None else text.strip())


def _cut(s: str) -> str:
    return s if len(s) <= 300 else s[:300] + "…"


def classify(resp, what: str, rules: Iterable[Rule] = (), at: ErrorAt = ErrorAt.DEFAULT) -> Error:
    """The contract error for error answer `resp` to `what` (`"POST /nodes"`),
    the message read where `at` says."""
    message = error_message(resp.body, at.message, at.code)
    kind = next((r.kind for r in rules if r.matches(resp.status, message)),
                default_kind(resp.status))
    text = f"{what} (HTTP {resp.status}): {message}"
    if kind == "rate_limited":
        return error(kind, text, retry_after_ms=resp.retry_after_ms())
    return error(kind, text)
