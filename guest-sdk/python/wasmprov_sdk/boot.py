"""Boot data as clouds take it: user data as text or base64, SSH keys by
identity. A provider honours a field (and says so in `BOOT`) or the glue
refuses requests giving it; these helpers refuse what a cloud cannot take
(`Unsupported`) instead of dropping or mangling it."""

import base64
from typing import Optional

from .errors import Unsupported
from .tags import ssh_key_identity, ssh_key_name

__all__ = ["user_data_text", "user_data_base64", "ssh_key_identity", "ssh_key_name"]


def user_data_text(boot) -> Optional[str]:
    """The user data as UTF-8 text; `Unsupported` when it is not UTF-8."""
    if boot.user_data is None:
        return None
    try:
        return bytes(boot.user_data).decode()
    except UnicodeDecodeError:
        raise Unsupported("this cloud takes user data as text, and this user data is not UTF-8")


def user_data_base64(boot, max_len: Optional[int] = None) -> Optional[str]:
    """The user data in base64 (any bytes); `Unsupported` when longer than
    `max_len` once encoded."""
    if boot.user_data is None:
        return None
    encoded = base64.b64encode(bytes(boot.user_data)).decode()
    if max_len is not None and len(encoded) > max_len:
        raise Unsupported(f"user data is {len(encoded)} bytes in base64; this cloud takes at "
                          f"most {max_len}")
    return encoded
