"""Times as clouds write them, as the contract's milliseconds since the
Unix epoch (`wasmprov_guest::time`, with its semantics: the Rust SDK reads
RFC 3339 as the `time` crate does): RFC 3339 with an offset or `Z`
(`rfc3339_ms`), naive UTC as Linode writes it (`naive_utc_ms`), epoch
seconds (`epoch_seconds_ms`), or whichever of them a string is (`any_ms`)."""

import calendar
import re
import time as _time
from typing import Optional

# ASCII digits only (`\d` would take other scripts' digits); any one ASCII
# character between date and time, as the `time` crate takes.
_RFC3339 = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})[\x00-\x7f]([0-9]{2}):([0-9]{2}):"
                      r"([0-9]{2})(?:\.([0-9]+))?(?:([Zz])|([+-])([0-9]{2}):([0-9]{2}))")
# What Rust's `str::trim` takes away (Unicode White_Space).
_SPACE = ("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
          "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
_U64 = (1 << 64) - 1


def _trim(s: str) -> str:
    return s.strip(_SPACE)


def rfc3339_ms(s: Optional[str]) -> Optional[int]:
    """Milliseconds since the epoch of an RFC 3339 time
    (`2025-06-01T12:00:00.000Z`, `2016-01-30T23:55:00+00:00`); None when `s`
    is not one or lies before the epoch. A leap second (`23:59:60`, only at
    the end of a month in UTC) reads as the millisecond before the next."""
    m = _RFC3339.fullmatch(_trim(s or ""))
    if not m:
        return None
    y, mo, d, h, mi, sec, frac, z, sign, oh, om = m.groups()
    y, mo, d, h, mi, sec = int(y), int(mo), int(d), int(h), int(mi), int(sec)
    offset = 0
    if not z:
        if int(oh) > 23 or int(om) > 59:
            return None
        offset = (1 if sign == "+" else -1) * (int(oh) * 3600 + int(om) * 60)
    nanos = int((frac or "0")[:9].ljust(9, "0"))
    leap = sec == 60
    if leap:
        sec, nanos = 59, 999_999_999
    if y == 0:
        return None  # a valid date or not, before the epoch
    if not (1 <= mo <= 12 and 1 <= d <= calendar.monthrange(y, mo)[1]
            and h <= 23 and mi <= 59 and sec <= 59):
        return None
    utc = calendar.timegm((y, mo, d, h, mi, sec)) - offset
    if leap:
        uy, umo, ud, uh, umi, us = _time.gmtime(utc)[:6]
        if not (uh == 23 and umi == 59 and us == 59 and ud == calendar.monthrange(uy, umo)[1]):
            return None
    ns = utc * 1_000_000_000 + nanos
    ms = ns // 1_000_000 if ns >= 0 else -((-ns) // 1_000_000)
    return ms if 0 <= ms <= _U64 else None


def naive_utc_ms(s: Optional[str]) -> Optional[int]:
    """Milliseconds since the epoch of a UTC time written without an offset
    (`2018-01-01T00:01:01`, `2018-01-01T00:01:01.5`, or with a space for the
    `T`); None when `s` is not one."""
    s = _trim(s or "")
    cut = min((i for i in (s.find("T"), s.find(" ")) if i >= 0), default=-1)
    if cut < 0:
        return None
    date, clock = s[:cut], s[cut + 1:]
    if any(c in clock for c in "Zz+-"):
        return None
    return rfc3339_ms(f"{date}T{clock}Z")


def epoch_seconds_ms(s: Optional[str]) -> Optional[int]:
    """Milliseconds of a count of seconds since the epoch, as text
    (`"1514764861"`, `"1514764861.25"`); None when it is not one."""
    s = _trim(s or "")
    whole, _, frac = s.partition(".")
    ascii_digits = set("0123456789")
    if not whole or not set(whole) <= ascii_digits or not set(frac) <= ascii_digits:
        return None
    seconds = int(whole)
    if seconds > _U64:
        return None
    ms = seconds * 1000 + int(frac[:3].ljust(3, "0"))
    return ms if ms <= _U64 else None


def any_ms(s: Optional[str]) -> Optional[int]:
    """Milliseconds since the epoch of any of the forms clouds write: RFC
    3339, naive UTC, or epoch seconds."""
    for parse in (rfc3339_ms, naive_utc_ms, epoch_seconds_ms):
        ms = parse(s)
        if ms is not None:
            return ms
    return None
