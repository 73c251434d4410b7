"""JSON over HTTP through the host's `wasi:http/outgoing-handler`, decided
as the Rust SDK decides (`wasmprov_guest::http`): a request the host's
grants refuse is `invalid_config`, a full in-flight limit `rate_limited`, a
timeout or broken connection `transport` (the host retries those; a plugin
never retries inside a call), and the `Retry-After` or rate-limit reset
header gives the wait. Everything but `send` is plain Python."""

import json as _json
import time
from email.utils import parsedate_to_datetime
from typing import Dict, List, Optional, Tuple
from urllib.parse import quote, unquote

from .errors import Error, InvalidConfig, RateLimited, Transport

MAX_BODY = 16 << 20


def encode(s: str) -> str:
    """Percent-encodes a query key or value (all but `A-Za-z0-9-._~`)."""
    return quote(s, safe="-._~")


class Request:
    """An HTTP request being built."""

    def __init__(self, method: str, url: str) -> None:
        self.method, self.url = method, url
        self.headers: List[Tuple[str, str]] = []
        self.body = b""

    @classmethod
    def get(cls, url: str) -> "Request":
        return cls("GET", url)

    @classmethod
    def post(cls, url: str) -> "Request":
        return cls("POST", url)

    @classmethod
    def put(cls, url: str) -> "Request":
        return cls("PUT", url)

    @classmethod
    def patch(cls, url: str) -> "Request":
        return cls("PATCH", url)

    @classmethod
    def delete(cls, url: str) -> "Request":
        return cls("DELETE", url)

    def _copy(self) -> "Request":
        r = Request(self.method, self.url)
        r.headers, r.body = list(self.headers), self.body
        return r

    def header(self, name: str, value: str) -> "Request":
        r = self._copy()
        r.headers.append((name, value))
        return r

    def bearer(self, token: str) -> "Request":
        return self.header("authorization", f"Bearer {token}")

    def query(self, key: str, value: str) -> "Request":
        r = self._copy()
        r.url += ("&" if "?" in r.url else "?") + f"{encode(key)}={encode(value)}"
        return r

    def json(self, body) -> "Request":
        r = self._copy()
        r.body = _json.dumps(body, separators=(",", ":")).encode()
        return r.header("content-type", "application/json")

    def with_url(self, url: str) -> "Request":
        r = self._copy()
        r.url = url
        return r

    def query_pairs(self) -> List[Tuple[str, str]]:
        _, sep, q = self.url.partition("?")
        pairs = []
        for p in (q.split("&") if sep else []):
            if p:
                k, _, v = p.partition("=")
                pairs.append((unquote(k), unquote(v)))
        return pairs

    def query_value(self, key: str) -> Optional[str]:
        return next((v for k, v in self.query_pairs() if k == key), None)

    def __repr__(self) -> str:
        return f"Request({self.method} {self.url})"


class Response:
    """A whole HTTP response; header names lowercase."""

    def __init__(self, status: int, headers: List[Tuple[str, str]], body: bytes, url: str) -> None:
        self.status, self.headers, self.body, self.url = status, headers, body, url

    def is_success(self) -> bool:
        return 200 <= self.status < 300

    def header(self, name: str) -> Optional[str]:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    def json(self):
        """The body as JSON; `Transport` naming the URL when it is not JSON."""
        try:
            return _json.loads(self.body)
        except ValueError as e:
            raise Transport(f"malformed response from {self.url} (status {self.status}): {e}")

    def text(self) -> str:
        return self.body.decode(errors="replace")

    def retry_after_ms(self) -> Optional[int]:
        return wait_ms(self.headers, time.time())


RESET_HEADERS = ("ratelimit-reset", "x-ratelimit-reset", "x-rate-limit-reset")
EPOCH_FROM = 1_000_000_000


def retry_after_ms(value: str, now: float) -> Optional[int]:
    """A `Retry-After` value (delta-seconds or HTTP date) in ms from `now`
    (seconds since the epoch); a past date is 0."""
    value = value.strip()
    if value.isascii() and value.isdigit():
        return int(value) * 1000
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(int(round((when - now) * 1000)), 0)


def wait_ms(headers: List[Tuple[str, str]], now: float) -> Optional[int]:
    """How long `headers` ask to wait: `Retry-After`, else a rate-limit
    reset header as seconds from now or as a Unix time."""
    def header(name):
        return next((v.strip() for k, v in headers if k.lower() == name), None)
    retry = header("retry-after")
    if retry is not None:
        ms = retry_after_ms(retry, now)
        if ms is not None:
            return ms
    value = next((v for v in map(header, RESET_HEADERS) if v is not None), None)
    if value is None:
        return None
    try:
        secs = float(value)
    except ValueError:
        return None
    if secs != secs or secs in (float("inf"),) or secs < 0 or value.lower() in ("nan", "inf"):
        return None
    ms = int(secs * 1000)
    return max(ms - int(now * 1000), 0) if secs >= EPOCH_FROM else ms


# --- wasi:http error codes, by the name of their binding class ---------------

_TIMEOUTS = {
    "DnsTimeout": "DNS timeout: the host name was not resolved in time; no connection was made",
    "ConnectionReadTimeout": "first-byte timeout: the connection was made and the request sent, but no response began in time",
    "ConnectionWriteTimeout": "send timeout: the connection was made, but the request could not be written in time",
    "ConnectionTimeout": "connect or first-byte timeout: no response began within the host's HTTP timeout (a host that tells them apart reports a first-byte timeout when the connection was made)",
}
_BODY_TIMEOUT = "body timeout: the connection was made and the response began (status and headers arrived), but its body did not finish in time"


def code_name(code) -> str:
    """`ErrorCode_HttpRequestDenied` → `HttpRequestDenied`."""
    return type(code).__name__.split("_", 1)[-1]


def http_error(url: str, code, in_body: bool = False) -> Error:
    """The contract error for a `wasi:http` error code, as the Rust SDK
    decides it: denied → invalid_config, connection limit → rate_limited,
    everything else transport (timeouts say which fired)."""
    name = code_name(code)
    what = f"{url}: ErrorCode::{name}"
    if name in ("HttpRequestDenied", "DestinationIpProhibited"):
        return InvalidConfig(f"HTTP request denied by the host: {what}")
    if name == "ConnectionLimitReached":
        return RateLimited("HTTP request waited too long for a slot under the host's "
                           f"in-flight limit: {what}")
    if name in _TIMEOUTS:
        words = _BODY_TIMEOUT if in_body else _TIMEOUTS[name]
        return Transport(f"HTTP timeout: {words}: {what}")
    if name in ("HttpResponseBodySize", "HttpResponseContentCoding"):
        return Transport(f"HTTP response too large: {what}")
    return Transport(f"HTTP transport error: {what}")


def split_url(url: str) -> Tuple[str, str, str]:
    """(scheme, authority, path with query); `InvalidConfig` for a bad URL."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise InvalidConfig(f"bad URL: {url}: no scheme")
    if scheme.lower() not in ("http", "https"):
        raise InvalidConfig(f"bad URL: {url}: unsupported scheme {scheme.lower()}")
    cut = min([i for i in (rest.find("/"), rest.find("?")) if i >= 0], default=len(rest))
    authority, path = rest[:cut], rest[cut:] or "/"
    if not authority:
        raise InvalidConfig(f"bad URL: {url}: no host")
    return scheme.lower(), authority, path


def send(request: Request) -> Response:
    """Sends `request` through the host and reads the whole answer (any
    status); a contract error when no answer came."""
    from componentize_py_types import Err
    from wit_world.imports import outgoing_handler, streams
    from wit_world.imports import wasi_http_types as h

    url = request.url
    scheme, authority, path = split_url(url)
    headers = [(k.lower(), v.encode()) for k, v in request.headers]
    if request.body:
        headers.append(("content-length", str(len(request.body)).encode()))
    out = h.OutgoingRequest(h.Fields.from_list(headers))
    methods = {"GET": h.Method_Get, "POST": h.Method_Post, "PUT": h.Method_Put,
               "DELETE": h.Method_Delete, "PATCH": h.Method_Patch}
    out.set_method(methods[request.method]() if request.method in methods
                   else h.Method_Other(request.method))
    out.set_scheme(h.Scheme_Https() if scheme == "https" else h.Scheme_Http())
    out.set_authority(authority)
    out.set_path_with_query(path)
    body = out.body()
    try:
        future = outgoing_handler.handle(out, None)
    except Err as e:
        raise http_error(url, e.value)
    write_failed = None
    try:
        with body.write() as stream:
            for i in range(0, len(request.body), 4096):
                stream.blocking_write_and_flush(request.body[i:i + 4096])
    except Err as e:
        write_failed = e.value
    try:
        h.OutgoingBody.finish(body, None)
        finished = None
    except Err as e:
        finished = e.value
    with future.subscribe() as ready:
        ready.block()
    answer = future.get()
    if answer is None or isinstance(answer, Err):
        raise Transport(f"HTTP transport error: {url}: response lost")
    if isinstance(answer.value, Err):
        raise http_error(url, answer.value.value)
    if write_failed is not None:
        raise Transport(f"HTTP transport error: {url}: writing body: {write_failed}")
    if finished is not None:
        raise http_error(url, finished)
    response = answer.value.value
    status = response.status()
    got = [(k.lower(), v.decode(errors="replace")) for k, v in response.headers().entries()]
    incoming = response.consume()
    data = bytearray()
    with incoming.stream() as stream:
        while True:
            try:
                data.extend(stream.blocking_read(65536))
            except Err as e:
                if isinstance(e.value, streams.StreamError_Closed):
                    break
                code = h.http_error_code(e.value.value)
                if code is not None:
                    raise http_error(url, code, in_body=True)
                raise Transport(f"HTTP transport error: {url}: reading body: "
                                f"{e.value.value.to_debug_string()}")
            if len(data) > MAX_BODY:
                raise Transport(f"HTTP response too large: {url}: over {MAX_BODY} bytes")
    h.IncomingBody.finish(incoming)
    return Response(status, got, bytes(data), url)
