"""Times as clouds write them, as the contract's milliseconds since the
Unix epoch (`wasmprov_guest::time`)."""

import re
from datetime import datetime, timezone
from typing import Optional

_RFC3339 = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(\.\d+)?([Zz]|[+-]\d\d:\d\d)$")


def rfc3339_ms(s: Optional[str]) -> Optional[int]:
    """Milliseconds since the epoch of an RFC 3339 time; None when `s` is
    not one or lies before the epoch."""
    m = _RFC3339.match((s or "").strip())
    if not m:
        return None
    y, mo, d, h, mi, sec, frac, tz = m.groups()
    try:
        offset = 0 if tz in "Zz" else (1 if tz[0] == "+" else -1) * (int(tz[1:3]) * 60 + int(tz[4:6]))
        t = datetime(int(y), int(mo), int(d), int(h), int(mi), int(sec), tzinfo=timezone.utc)
    except ValueError:
        return None
    ms = int(t.timestamp()) * 1000 - offset * 60_000 + int((frac or ".0")[1:4].ljust(3, "0"))
    return ms if ms >= 0 else None
