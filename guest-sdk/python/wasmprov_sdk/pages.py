"""Walking the pages of a list call, whichever way the cloud pages: page
numbers (with a next number, a page count, or a short last page), a
next-page URL in the body, a `Link` header, or an opaque token
(`wasmprov_guest::pages`). Every walk is bounded (`MAX_PAGES`) and stops
with an error when the cloud names a page it already gave."""

from typing import Callable, NamedTuple, Optional

from . import pointer
from .errors import Transport
from .http import Request, Response

#: Most pages one walk reads.
MAX_PAGES = 1000


class Single(NamedTuple):
    """One page holds everything."""


class Numbers(NamedTuple):
    """`?<page>=N` from 1; the next number is at pointer `next` (null or
    absent on the last page); with no `next`, a page of fewer than `size`
    items (at pointer `items`) is the last."""
    page: str
    size: int
    next: Optional[str]
    items: str


class Pages(NamedTuple):
    """`?<page>=N` from 1, the number of pages at pointer `pages`: exactly
    that many pages are asked for. A missing count, a count that changes
    between pages, or an answer naming another page (at the pointer beside
    `pages` named `page`) fails the walk (`Transport`, retryable)."""
    page: str
    pages: str


class NextUrl(NamedTuple):
    """The next page's URL at this pointer; null, empty or absent on the last."""
    pointer: str


class LinkHeader(NamedTuple):
    """An RFC 8288 `Link` header with `rel="next"` names the next page."""


class Token(NamedTuple):
    """A token at `pointer`, sent back as query parameter `param`."""
    param: str
    pointer: str


def next_link(value: str) -> Optional[str]:
    """The `rel="next"` target of a `Link` header value."""
    for link in value.split(","):
        target, sep, params = link.strip().partition(";")
        target = target.strip()
        if not sep or not (target.startswith("<") and target.endswith(">")):
            continue
        for p in params.split(";"):
            k, eq, v = p.strip().partition("=")
            if eq and k.strip().lower() == "rel" and any(
                    r.lower() == "next" for r in v.strip().strip('"').split()):
                return target[1:-1]
    return None


def _is_u64(v) -> bool:
    """Whether a JSON value is a number Rust's `as_u64` reads."""
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2 ** 64


def _without_query(url: str) -> str:
    return url.split("?", 1)[0]


def _numbered(base: Request, page: str, n: int) -> Request:
    req = Request(base.method, _without_query(base.url))
    req.headers, req.body = list(base.headers), base.body
    for k, v in base.query_pairs():
        if k != page:
            req = req.query(k, v)
    return req.query(page, str(n))


def walk(first: Request, paging, send: Callable[[Request], Response],
         each: Callable[[object], None]) -> None:
    """Sends `first` and every following page with `send` (which raises for
    an error answer), handing each page's JSON body to `each`, in order."""
    request = first.query(paging.page, "1") if isinstance(paging, (Numbers, Pages)) else first
    base, seen, pages_seen = request, set(), None
    for number in range(1, MAX_PAGES + 1):
        resp = send(request)
        body = resp.json()
        each(body)
        nxt = None
        if isinstance(paging, Numbers):
            if paging.next is not None:
                following = pointer.get(body, paging.next)
                if following is not None and not _is_u64(following):
                    raise Transport(f"{resp.url}: the next page at {paging.next} is "
                                    f"{following!r}, not a page number")
            else:
                items = pointer.get(body, paging.items)
                count = len(items) if isinstance(items, list) else 0
                following = number + 1 if count >= paging.size else None
            if following is not None:
                nxt = _numbered(base, paging.page, following)
        elif isinstance(paging, Pages):
            total = pointer.get(body, paging.pages)
            if total is None:
                raise Transport(f"{resp.url}: the answer has no number of pages at {paging.pages}")
            if not _is_u64(total):
                raise Transport(f"{resp.url}: the number of pages at {paging.pages} is "
                                f"{total!r}, not a number")
            # A list read while it changes would come back partial: fail, retryably.
            if pages_seen is not None and pages_seen != total:
                raise Transport(f"{resp.url}: the list changed while it was read (pages "
                                f"{pages_seen}, then {total}); read it again")
            pages_seen = total
            at = paging.pages.rpartition("/")[0] + "/" + paging.page
            answered = pointer.get(body, at)
            if answered is not None and not (_is_u64(answered) and answered == number):
                raise Transport(f"{resp.url}: page {number} was asked, the answer is page "
                                f"{answered!r} (at {at}); read the list again")
            if number < total:
                nxt = _numbered(base, paging.page, number + 1)
        elif isinstance(paging, NextUrl):
            url = pointer.get(body, paging.pointer)
            if isinstance(url, str) and url:
                nxt = base.with_url(url)
        elif isinstance(paging, LinkHeader):
            url = next_link(resp.header("link") or "")
            if url is not None:
                nxt = base.with_url(url)
        elif isinstance(paging, Token):
            token = pointer.get(body, paging.pointer)
            if isinstance(token, str) and token:
                nxt = base.query(paging.param, token)
        if nxt is None:
            return
        if request.url in seen or nxt.url in seen | {request.url}:
            raise Transport(f"{resp.url}: the list names a page already read as the next one "
                            f"({nxt.url})")
        seen.add(request.url)
        request = nxt
    raise Transport(f"{base.url}: the list goes on for more than {MAX_PAGES} pages; giving up")
