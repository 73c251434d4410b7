"""A provider for a plain REST cloud from its endpoints and mappings
(`wasmprov_guest::rest`). Subclass `RestCloud`, describe the API (how to
list, read, create and delete nodes, where nodes are in answers, how a node
reads as a handle, how lists page, which error answers mean what), and the
node calls come from here, the same for every cloud:

- provision looks for the request's node first (owner and request labels)
  and returns it; otherwise creates one; a create refused as a conflict (a
  concurrent provision won) looks again and returns the winner;
- terminate and get read the node and check its owner label first: another
  owner's node is `not_found`, never touched;
- describe walks every page, keeps only this owner's nodes, drops repeats;
- every error answer is classified once (`classify`).

The transport is `self.transport` (the host's `wasi:http` by default), so
unit tests run the same code natively against scripted answers."""

from typing import Dict, List, Optional, Sequence

from . import classify, http, log, pages, pointer, tags
from .errors import Conflict, NotFound, Other, Transport
from .http import Request, Response
from .model import NodeHandle, ProvisionRequest
from .provider import Provider


#: Most labels on a node the host is answered with (`wasmprov_api::MAX_HANDLE_LABELS`).
MAX_HANDLE_LABELS = 256
#: Longest label key on such a node, in bytes.
MAX_HANDLE_LABEL_KEY = 256
#: Longest label value on such a node, in bytes.
MAX_HANDLE_LABEL_VALUE = 1024


def within_host_limits(labels: Dict[str, str]) -> List[str]:
    """Leaves out of `labels` (in place) those the host refuses on a node:
    an empty or too long key, a too long value, and past `MAX_HANDLE_LABELS`
    the last in key order; reserved labels are kept. One node tagged by hand
    would otherwise deny its owner's describe. Returns what was left out."""
    def shown(k: str, v: str) -> str:
        return f"{k[:40]!r} ({len(k.encode())} bytes of key, {len(v.encode())} of value)"
    dropped = []
    for k in sorted(labels):
        v = labels[k]
        fits = 0 < len(k.encode()) <= MAX_HANDLE_LABEL_KEY and len(v.encode()) <= MAX_HANDLE_LABEL_VALUE
        if not fits and not tags.is_reserved_label(k):
            dropped.append(shown(k, v))
            del labels[k]
    room = MAX_HANDLE_LABELS - sum(1 for k in labels if tags.is_reserved_label(k))
    for k in sorted(labels):
        if tags.is_reserved_label(k):
            continue
        if room <= 0:
            dropped.append(shown(k, labels.pop(k)))
        else:
            room -= 1
    return dropped


class RestCloud(Provider):
    """What this module needs to know about a cloud."""

    #: The cloud's name, for messages.
    CLOUD = "cloud"
    #: How list answers page (`pages.Numbers(...)`, `pages.NextUrl(...)`, ...).
    PAGING = pages.Single()
    #: Pointer to the array of nodes in a list answer (`/droplets`).
    LIST_ITEMS = "/nodes"
    #: Pointer to the node in a get or create answer (`""`: the answer is the node).
    ONE_ITEM = "/node"
    #: Error rules checked before the status defaults.
    ERRORS: Sequence[classify.Rule] = ()
    #: Where error answers hold the message and code.
    ERROR_AT = classify.ErrorAt.DEFAULT

    def transport(self, request: Request) -> Response:
        """Sends a request and reads the whole answer, whatever its status."""
        return http.send(request)

    def list(self, owner_id: str, request_id: Optional[str]) -> Request:
        """The list request for `owner_id`'s nodes (made for `request_id`),
        filtered as narrowly as the API allows, with its page size."""
        raise NotImplementedError

    def node_url(self, id: str) -> Optional[str]:
        """The URL of node `id`, or None when `id` cannot be one of this cloud's."""
        raise NotImplementedError

    def create(self, request: ProvisionRequest, labels: Dict[str, str]) -> Request:
        """The create request for `request` with `labels` (owner, request
        id, digest and the shape's), encoded as the cloud stores them."""
        raise NotImplementedError

    def authorize(self, request: Request) -> Request:
        """Adds credentials to a request."""
        return request

    def handle(self, node) -> NodeHandle:
        """The node (JSON) as a handle, labels decoded."""
        raise NotImplementedError

    def error(self, resp: Response, what: str):
        """The contract error for an error answer to `what`."""
        return classify.classify(resp, what, self.ERRORS, self.ERROR_AT)

    # --- what this module does with the above ---

    def send(self, request: Request) -> Response:
        """Sends `request` (authorized); raises the classified error of a non-2xx answer."""
        path = request.url.split("://", 1)[-1]
        path = "/" + path.split("/", 1)[1] if "/" in path else "/"
        what = f"{self.CLOUD} {request.method} {path.split('?', 1)[0]}"
        resp = self.transport(self.authorize(request))
        if not resp.is_success():
            raise self.error(resp, what)
        return resp

    def _node_at(self, resp: Response) -> NodeHandle:
        node = pointer.get(resp.json(), self.ONE_ITEM)
        if not isinstance(node, dict):
            raise Transport(f"{self.CLOUD}: the answer from {resp.url} has no node at "
                            f"{self.ONE_ITEM}")
        return self._handle(node, resp.url)

    def _handle(self, node, where: str) -> NodeHandle:
        try:
            handle = self.handle(node)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise Transport(f"{self.CLOUD}: a node in the answer from {where} is malformed: "
                            f"{e!r}")
        handle.labels = dict(handle.labels)
        for dropped in within_host_limits(handle.labels):
            log.warn(f"{self.CLOUD}: node {handle.provider_id!r} carries label {dropped}, more "
                     "than the host takes; left out")
        return handle

    def collect(self, first: Request, items: str) -> list:
        """Every item at pointer `items` of every page."""
        out: list = []

        def each(page) -> None:
            found = pointer.get(page, items)
            if found is None:
                return
            if not isinstance(found, list):
                raise Transport(f"{self.CLOUD}: the list's {items} is not an array")
            out.extend(found)
        pages.walk(first, self.PAGING, self.send, each)
        return out

    def find(self, owner_id: str, request_id: Optional[str] = None) -> List[NodeHandle]:
        """This owner's nodes (made for `request_id`), every page, each once."""
        seen, found = set(), []
        for item in self.collect(self.list(owner_id, request_id), self.LIST_ITEMS):
            node = self._handle(item, "the list")
            if (node.labels.get(tags.OWNER) == owner_id
                    and (request_id is None or node.labels.get(tags.REQUEST) == request_id)
                    and node.provider_id not in seen):
                seen.add(node.provider_id)
                found.append(node)
        return found

    def provision(self, owner_id: str, request: ProvisionRequest) -> NodeHandle:
        for node in self.find(owner_id, request.request_id):
            return node
        labels = tags.node_labels(owner_id, request.request_id, tags.request_labels(request))
        try:
            node = self._node_at(self.send(self.create(request, labels)))
        except Conflict:
            # A concurrent provision of the same request may have won.
            for node in self.find(owner_id, request.request_id):
                return node
            raise
        if (node.labels.get(tags.OWNER) != owner_id
                or node.labels.get(tags.REQUEST) != request.request_id):
            # It would never be found again; not an error that says nothing
            # was made: the caller keeps the intent and reconciles.
            raise Other(f"{self.CLOUD}: node {node.provider_id!r} was made for request "
                        f"{request.request_id!r} but reads back with owner "
                        f"{node.labels.get(tags.OWNER)!r} and request "
                        f"{node.labels.get(tags.REQUEST)!r}; it is not found by its labels")
        return node

    def get(self, owner_id: str, provider_id: str) -> Optional[NodeHandle]:
        url = self.node_url(provider_id)
        if url is None:
            return None
        try:
            node = self._node_at(self.send(Request.get(url)))
        except NotFound:
            return None
        if node.provider_id != provider_id:
            # An answer naming another node is not the node asked for: never
            # act on one id after checking another node's owner.
            log.warn(f"{self.CLOUD}: asked for node {provider_id!r}, the answer is node "
                     f"{node.provider_id!r}; treated as not found")
            return None
        return node if node.labels.get(tags.OWNER) == owner_id else None

    def terminate(self, owner_id: str, provider_id: str) -> None:
        url = self.node_url(provider_id)
        if url is None or self.get(owner_id, provider_id) is None:
            raise NotFound(f"{self.CLOUD} node {provider_id!r} does not exist or is not owned "
                           "by this host")
        self.send(Request.delete(url))

    def describe(self, owner_id: str) -> List[NodeHandle]:
        return self.find(owner_id)
