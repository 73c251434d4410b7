"""Ids and tags, encoded exactly as the Rust SDK encodes them
(`wasmprov_guest::tags`, `wasmprov_api::{ids, tags}`): the same input gives
the same bytes in either language, so a fleet may mix plugins written in
both. The owner and request ids go on nodes unchanged; other labels are
encoded by a reversible codec ([`TagCodec`], [`FlatTags`]) or reduced with
`label_value` (not reversible: never for an id)."""

import hashlib
import json
import math
from decimal import Decimal
from typing import Dict, Iterable, List, Optional, Tuple

from .errors import InvalidConfig, Unsupported

#: Label carrying the owner id of the host that created the node.
OWNER = "wasmprov-owner"
#: Label carrying the request id that created the node.
REQUEST = "wasmprov-request"
#: Label carrying the node's provenance (journal and generation), set by the host.
JOURNAL = "wasmprov-journal"
#: Label carrying `request_digest` of what the node was requested as.
REQUEST_DIGEST = "wasmprov-request-digest"
#: Label a fleet puts on the nodes of a capacity group.
GROUP = "wasmprov-group"


def is_reserved_label(key: str) -> bool:
    """Whether `key` is a label the host or the SDK sets (owner, journal,
    request id, digest, group): never a caller's (`wasmprov_api::provenance`)."""
    return key in (OWNER, JOURNAL, REQUEST, REQUEST_DIGEST, GROUP)


#: Longest request or owner id.
MAX_ID_LEN = 63
ID_SYNTAX = ("1 to 63 characters of lowercase letters a-z, digits, '-' and '_', "
             "starting and ending with a letter or digit")
#: Longest host name label.
MAX_HOSTNAME = 63
#: Hex digits of SHA-256 a hashed host name ends with (64 bits).
HOSTNAME_HASH_LEN = 16

_EDGE = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_ID = _EDGE | {"-", "_"}


def is_valid_id(id: str) -> bool:
    """Whether `id` is a valid request or owner id (`ID_SYNTAX`)."""
    return (0 < len(id) <= MAX_ID_LEN and id[0] in _EDGE and id[-1] in _EDGE
            and all(c in _ID for c in id))


def id_problem(what: str, id: str) -> Optional[str]:
    """Why `id` is not valid, or None when it is."""
    if is_valid_id(id):
        return None
    shown = id[:80]
    cut = "..." if len(shown.encode()) < len(id.encode()) else ""
    return f"{what} {_debug_str(shown)}{cut} is not valid: use {ID_SYNTAX}"


def check_request_id(id: str) -> None:
    """Raises `Unsupported` for an invalid request id."""
    problem = id_problem("request id", id)
    if problem:
        raise Unsupported(problem)


def check_owner_id(id: str) -> None:
    """Raises `InvalidConfig` for an invalid owner id (the host's configuration)."""
    problem = id_problem("owner id", id)
    if problem:
        raise InvalidConfig(problem)


def _debug_str(s: str) -> str:
    """`s` quoted as Rust's `{:?}` writes a string (common characters)."""
    out = []
    for c in s:
        if c in '"\\':
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        elif c == "\0":
            out.append("\\0")
        elif ord(c) < 0x20 or ord(c) == 0x7f:
            out.append(f"\\u{{{ord(c):x}}}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def id_tag(id: str) -> str:
    """The tag value of an owner or request id: the id itself."""
    return id


class TooLong(Unsupported):
    """A label the cloud cannot store: too long once encoded."""


class TagCodec:
    """A reversible encoding into a cloud's alphabet: other characters (and
    the escape character) become the escape and two uppercase hex digits per
    UTF-8 byte; longer than `max_len` is `TooLong`, never a truncation."""

    def __init__(self, name: str, alphabet: str, escape: str = "X", max_len: int = 63) -> None:
        self.name, self.alphabet, self.escape, self.max_len = name, alphabet, escape, max_len
        self._stores = frozenset(ord(c) for c in alphabet) - {ord(escape)}

    def _encode(self, text: str, limit: Optional[int], what: str) -> str:
        out = "".join(chr(b) if b in self._stores else f"{self.escape}{b:02X}"
                      for b in text.encode())
        if limit is not None and len(out) > limit:
            raise TooLong(f"{what} {_debug_str(text[:80])} is {len(out)} characters once "
                          f"encoded; {self.name} stores at most {limit}")
        return out

    def encode(self, text: str) -> str:
        """`text` in the alphabet."""
        return self._encode(text, self.max_len, "label value")

    def decode(self, encoded: str) -> Optional[str]:
        """What `encoded` stands for; None when `encode` did not write it."""
        out, i, esc = bytearray(), 0, ord(self.escape)
        raw = encoded.encode()
        while i < len(raw):
            b = raw[i]
            if b == esc:
                hexa = encoded[i + 1:i + 3]
                if len(hexa) != 2 or not all(c in "0123456789ABCDEF" for c in hexa):
                    return None
                byte = int(hexa, 16)
                if byte in self._stores:
                    return None
                out.append(byte)
                i += 3
            elif b in self._stores:
                out.append(b)
                i += 1
            else:
                return None
        try:
            return out.decode()
        except UnicodeDecodeError:
            return None


_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
#: Label values of clouds storing `[A-Za-z0-9_.-]`, at most 63 (Hetzner).
LABEL_VALUE = TagCodec("label values ([A-Za-z0-9_.-], at most 63)", _ALNUM + "_.-", "X", 63)


class FlatTags:
    """Labels as flat tags `KEY<separator>VALUE` (DigitalOcean, Linode),
    key and value encoded with one codec in which the separator is escaped."""

    def __init__(self, codec: TagCodec, separator: str = ":") -> None:
        self.codec, self.separator = codec, separator

    def encode(self, key: str, value: str) -> str:
        """The tag for label `key` = `value`."""
        tag = (self.codec._encode(key, None, "tag") + self.separator
               + self.codec._encode(value, None, "tag"))
        if len(tag) > self.codec.max_len:
            raise TooLong(f"tag {_debug_str(tag[:80])} is {len(tag)} characters once encoded; "
                          f"{self.codec.name} stores at most {self.codec.max_len}")
        return tag

    def decode(self, tag: str) -> Optional[Tuple[str, str]]:
        """The label a tag stands for; None for a tag this encoding did not write."""
        key, sep, value = tag.partition(self.separator)
        if not sep:
            return None
        k, v = self.codec.decode(key), self.codec.decode(value)
        return None if k is None or v is None else (k, v)

    def encode_all(self, labels: Dict[str, str]) -> List[str]:
        """Every label as a tag, in key order."""
        return [self.encode(k, labels[k]) for k in sorted(labels)]

    def decode_all(self, tags: Iterable[str]) -> Dict[str, str]:
        """The labels of `tags`; tags this encoding did not write are left out."""
        return dict(kv for kv in map(self.decode, tags) if kv is not None)


#: DigitalOcean's tags: `[A-Za-z0-9:_-]`, at most 255 characters.
DIGITALOCEAN = FlatTags(TagCodec("DigitalOcean tags ([A-Za-z0-9:_-], at most 255)",
                                 _ALNUM + "_-", "X", 255), ":")
FlatTags.DIGITALOCEAN = DIGITALOCEAN
#: Hetzner's label values (`[A-Za-z0-9_.-]`, at most 63): ids fit unchanged.
HETZNER = LABEL_VALUE


class Preset:
    """A cloud's flat tags with its length limits (`wasmprov_guest::tags::Preset`):
    a label whose tag `KEY:VALUE` fits is that tag; otherwise a hash tag
    `KEY::<16 hex>` (the selector to filter by) and piece tags `KEY:1:...`,
    `KEY:2:...` holding the encoded value, read back only when whole."""

    def __init__(self, flat: FlatTags, min_len: int, case_insensitive: bool = False) -> None:
        self.flat, self.min_len, self.case_insensitive = flat, min_len, case_insensitive

    def _folded(self, tag: str) -> str:
        """`tag` in ASCII lowercase when the cloud's tags are case-insensitive
        and it is the tag of a `FOLDED` label, else as it is."""
        if self.case_insensitive:
            lower = "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in tag)
            if lower != tag and lower.split(self.flat.separator, 1)[0] in FOLDED:
                return lower
        return tag

    def _too_long(self, text: str) -> TooLong:
        return TooLong(f"tag {_debug_str(text[:80])} is {len(text)} characters once encoded; "
                       f"{self.flat.codec.name} stores at most {self.flat.codec.max_len}")

    def encode(self, key: str, value: str) -> List[str]:
        """The tags of label `key` = `value`: one plain tag, or the long form."""
        codec, sep, limit = self.flat.codec, self.flat.separator, self.flat.codec.max_len
        plain = codec._encode(key, None, "tag") + sep + codec._encode(value, None, "tag")
        if self.min_len <= len(plain) <= limit:
            return [plain]
        ekey, _, rest = plain.partition(sep)
        digest = hashlib.sha256(key.encode() + b"\0" + value.encode()).hexdigest()[:16]
        tags = [f"{ekey}{sep}{sep}{digest}"]
        if len(tags[0]) > limit:
            raise self._too_long(tags[0])
        while rest:
            head = f"{ekey}{sep}{len(tags)}{sep}"
            room = min(max(limit - len(head), 0), len(rest))
            if room == 0:
                raise self._too_long(plain)
            tags.append(head + rest[:room])
            rest = rest[room:]
        return tags

    def encode_all(self, labels: Dict[str, str]) -> List[str]:
        """Every label as tags, in key order."""
        return [t for k in sorted(labels) for t in self.encode(k, labels[k])]

    def selector(self, key: str, value: str) -> str:
        """The one tag that selects nodes labelled `key` = `value`."""
        return self.encode(key, value)[0]

    def list_selector(self, owner_id: str, request_id: Optional[str]) -> str:
        """The request's selector when given (the narrower), else the owner's."""
        return (self.selector(REQUEST, request_id) if request_id is not None
                else self.selector(OWNER, owner_id))

    def decode_all(self, tags: Iterable[str]) -> Dict[str, str]:
        """The labels of `tags`: plain tags, and long forms whose pieces are
        all there and hash to their hash tag; other tags are left out. A key
        claimed with two different values (plain or long forms, or two pieces
        of one number) is left out too: a node with two owners is nobody's."""
        tags = [self._folded(t) for t in tags]
        sep = self.flat.separator
        claims: Dict[str, set] = {}
        conflicted = set()
        for kv in map(self.flat.decode, tags):
            if kv is not None:
                claims.setdefault(kv[0], set()).add(kv[1])
        hashes: Dict[str, set] = {}
        pieces: Dict[str, Dict[int, set]] = {}
        for tag in tags:
            key, found, rest = tag.partition(sep)
            if not found:
                continue
            if rest.startswith(sep):
                hashes.setdefault(key, set()).add(rest[1:])
                continue
            digits, found, piece = rest.partition(sep)
            if found and digits.isascii() and digits.isdigit() and str(int(digits)) == digits:
                pieces.setdefault(key, {}).setdefault(int(digits), set()).add(piece)
        for ekey in sorted(hashes):
            key = self.flat.codec.decode(ekey)
            if key is None:
                continue
            parts = pieces.pop(ekey, {})
            run = 0
            while run + 1 in parts and run < len(parts):
                run += 1
            if len(hashes[ekey]) > 1 or any(len(parts[n]) > 1 for n in range(1, run + 1)):
                conflicted.add(key)
                continue
            (digest,) = hashes[ekey]
            piece = {n: next(iter(parts[n])) for n in range(1, run + 1)}
            value = self.flat.codec.decode("".join(piece[n] for n in range(1, run + 1)))
            if value is None:
                continue
            try:
                expected = self.encode(key, value)
            except TooLong:
                continue
            given = [f"{ekey}{sep}{sep}{digest}"] + [
                f"{ekey}{sep}{n}{sep}{piece[n]}" for n in range(1, run + 1)]
            if given == expected:
                claims.setdefault(key, set()).add(value)
        return {k: next(iter(v)) for k, v in claims.items()
                if len(v) == 1 and k not in conflicted}

    def matches(self, tags: Iterable[str], key: str, value: str) -> bool:
        """Whether `tags` carry label `key` = `value`."""
        return self.decode_all(tags).get(key) == value


_FLAT = _ALNUM + "_-"
#: The labels whose tags a case-insensitive preset reads in lowercase (the
#: SDK writes them only in lowercase: ids, journal ids, hex).
FOLDED = (OWNER, REQUEST, JOURNAL, REQUEST_DIGEST)
Preset.DIGITALOCEAN = Preset(DIGITALOCEAN, 1, case_insensitive=True)
Preset.LINODE = Preset(FlatTags(TagCodec("Linode tags (3 to 50 characters)", _FLAT, "X", 50), ":"), 3,
                       case_insensitive=True)
Preset.VULTR = Preset(FlatTags(TagCodec("Vultr tags (at most 255 characters)", _FLAT, "X", 255),
                               ":"), 1)


def _fnv1a(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def short_hash(data: bytes) -> int:
    """FNV-1a, 32 bits: name suffixes that keep distinct inputs distinct."""
    return _fnv1a(data)


def label_value(s: str) -> str:
    """`s` made safe as a label value: lowercase `[a-z0-9_.-]`, at most 63,
    alphanumeric at both ends; not reversible (never for ids)."""
    out = "".join(c if (c.isascii() and (c.isalnum() or c in "-_.")) else "-"
                  for c in (ch.lower() if ch.isascii() else ch for ch in s))
    if len(out.encode()) > 63 or out != s:
        h = _fnv1a(s.encode())
        out = _truncate_utf8(out, 63 - 9)
        out = f"{out.rstrip('-_.')}-{h:08x}"
    trimmed = out.strip("-_.")
    return trimmed if trimmed else f"x{_fnv1a(s.encode()):08x}"


def _truncate_utf8(s: str, n: int) -> str:
    return s.encode()[:n].decode()  # only ASCII is left by then


def is_hostname_label(name: str) -> bool:
    """Whether `name` is one valid host name label."""
    return (0 < len(name) <= MAX_HOSTNAME and not name.startswith("-") and not name.endswith("-")
            and all(c.isascii() and (c.isalnum() or c == "-") for c in name))


def hostname(prefix: str, text: str, key: bytes) -> str:
    """`<prefix>-<text>` as a host name label, hashed by `key` when `text`
    is not host-name-safe, holds `--`, or is too long."""
    room = max(MAX_HOSTNAME - (len(prefix) + 1), 0)
    if is_hostname_label(text) and len(text) <= room and "--" not in text:
        return f"{prefix}-{text}"
    return hostname_with_hash(prefix, text, key)


def hostname_with_hash(prefix: str, text: str, key: bytes) -> str:
    """Like `hostname`, always with the `-<hash of key>` suffix
    (`HOSTNAME_HASH_LEN` hex digits of SHA-256)."""
    room = max(MAX_HOSTNAME - (len(prefix) + 1 + 1 + HOSTNAME_HASH_LEN), 0)
    head = ""
    for c in text:
        c = c.lower() if c.isascii() and c.isalnum() else "-"
        if len(head) == room:
            break
        if not (c == "-" and head.endswith("-")):
            head += c  # runs of `-` become one: some clouds refuse `--`
    head = head.strip("-")
    h = hashlib.sha256(key).hexdigest()[:HOSTNAME_HASH_LEN]
    return f"{prefix}-{h}" if not head else f"{prefix}-{head}-{h}"


def pair_token(owner_id: str, request_id: str, max_len: int) -> str:
    """One token of at most `max_len` (>= 64) characters for an (owner,
    request) pair: `owner/request`, else SHA-256 of both, hex."""
    plain = f"{owner_id}/{request_id}"
    if len(plain.encode()) <= max_len:
        return plain
    return hashlib.sha256(owner_id.encode() + b"\0" + request_id.encode()).hexdigest()


def ssh_key_identity(key: str) -> str:
    """An OpenSSH key line without its comment: type and data."""
    return " ".join(key.split()[:2])


def ssh_key_name(key: str) -> str:
    """`wasmprov-` and 16 hex digits of SHA-256 of the key's identity."""
    return "wasmprov-" + hashlib.sha256(ssh_key_identity(key).encode()).hexdigest()[:16]


# --- the request digest: serde_json's bytes of (shape, boot) ------------------


def _json_f64(x: float) -> str:
    """`x` as serde_json writes an f64: the shortest digits that read back
    as `x` (as `repr`), fixed for exponents -5 to 15, else `1.5e+16`."""
    if math.isnan(x) or math.isinf(x):
        return "null"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign, digits, exp = Decimal(repr(float(x))).normalize().as_tuple()
    d = "".join(map(str, digits))
    k, kk = exp, len(d) + exp
    if 0 <= k and kk <= 16:
        s = d + "0" * k + ".0"
    elif 0 < kk <= 16:
        s = d[:kk] + "." + d[kk:]
    elif -5 < kk <= 0:
        s = "0." + "0" * -kk + d
    else:
        e = kk - 1
        s = (d if len(d) == 1 else f"{d[0]}.{d[1:]}") + f"e{'+' if e >= 0 else '-'}{abs(e)}"
    return ("-" if sign else "") + s


def _json(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _json_f64(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (bytes, bytearray, list, tuple)):
        return "[" + ",".join(_json(x) for x in v) + "]"
    raise TypeError(f"no JSON form for {type(v).__name__}")


def _obj(pairs) -> str:
    return "{" + ",".join(f"{_json(k)}:{v}" for k, v in pairs) + "}"


def request_digest(request) -> str:
    """16 hex digits of SHA-256 over the JSON of the request's shape and boot
    data, byte for byte as the Rust SDK writes it (host labels left out)."""
    s, b = request.shape, request.boot
    labels = {k: v for k, v in s.labels.items() if k not in (OWNER, JOURNAL)}
    shape = _obj([
        ("cpu", _json(float(s.cpu))), ("memory_bytes", _json(s.memory_bytes)),
        ("gpu", _json(s.gpu)), ("gpu_vendor", _json(s.gpu_vendor)),
        ("gpu_model", _json(s.gpu_model)), ("arch", _json(s.arch)),
        ("disk_bytes", _json(s.disk_bytes)),
        ("labels", _obj((k, _json(labels[k])) for k in sorted(labels))),
        ("zone", _json(s.zone)), ("capacity_type", _json(s.capacity_type)),
        ("instance_type", _json(s.instance_type)),
    ])
    boot = _obj([("image", _json(b.image)), ("user_data", _json(b.user_data)),
                 ("ssh_keys", _json(list(b.ssh_keys)))])
    return hashlib.sha256(f"[{shape},{boot}]".encode()).hexdigest()[:16]


def request_labels(request) -> Dict[str, str]:
    """The shape's labels and `REQUEST_DIGEST`."""
    labels = dict(request.shape.labels)
    labels[REQUEST_DIGEST] = request_digest(request)
    return labels


def node_labels(owner_id: str, request_id: str, shape_labels: Dict[str, str]) -> Dict[str, str]:
    """The labels to put on a node: the shape's labels plus owner and request tags."""
    labels = dict(shape_labels)
    labels[OWNER] = id_tag(owner_id)
    labels[REQUEST] = id_tag(request_id)
    return labels
