"""Random secrets (`wasmprov_guest::random`): passwords for clouds that
want one at create (Linode's `root_pass`), from the operating system's
random source (the host's `wasi:random` in a component)."""

import os
from typing import Callable

_LOWER = "abcdefghijkmnopqrstuvwxyz"
_UPPER = "ABCDEFGHJKLMNPQRSTUVWXYZ"
_DIGIT = "23456789"
_SYMBOL = "-_.+=@#%"


def bytes_(n: int) -> bytes:
    """`n` cryptographically secure random bytes."""
    return os.urandom(n)


def password(length: int) -> str:
    """A password of `length` characters (at least 8), with lowercase and
    uppercase letters, digits and symbols (`-_.+=@#%`, which no shell, URL or
    JSON treats specially), each class at least once; uniform over its
    alphabet (rejection sampling)."""
    return password_from(max(length, 8), bytes_)


def password_from(length: int, source: Callable[[int], bytes]) -> str:
    """`password` with the random bytes from `source` (for tests): the same
    bytes give the Rust SDK's password, character for character."""
    classes = [_LOWER, _UPPER, _DIGIT, _SYMBOL]
    alphabet = "".join(classes)

    def draw(modulus: int) -> int:
        # Bytes below the largest multiple of the modulus: no bias.
        limit = 256 - 256 % min(modulus, 256)
        while True:
            for b in source(16):
                if b < limit:
                    return b % modulus

    out = [c[draw(len(c))] for c in classes]
    while len(out) < length:
        out.append(alphabet[draw(len(alphabet))])
    # The four classes at random places, not always first.
    for i in range(len(out) - 1, 0, -1):
        j = draw(i + 1)
        out[i], out[j] = out[j], out[i]
    return "".join(out)
