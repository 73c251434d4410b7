"""The REST layer and the export glue's rules against a small in-memory
cloud (paged lists, labels, foreign nodes, error answers): what the
conformance suite checks of every plugin, here without a component."""

import json
import unittest

from wasmprov_sdk import (BootData, BootSupport, NodeHandle, NodeShape, ProvisionRequest, Request,
                          RestCloud, Rule, pages, tags)
from wasmprov_sdk.errors import Conflict, NotFound, Other, Quota, Unsupported
from wasmprov_sdk.http import Response
from wasmprov_sdk.provider import checked_provision


class Cloud:
    """Nodes with labels; lists page by 2; creates may be refused."""

    def __init__(self):
        self.nodes, self.asked, self.refuse = {}, [], None

    def add(self, labels):
        id = f"n-{len(self.nodes) + 1}"
        self.nodes[id] = {"id": id, "labels": labels}
        return id

    def __call__(self, req):
        self.asked.append((req.method, req.url))
        assert ("authorization", "Bearer t") in req.headers, req.headers
        path = req.url.split("://", 1)[1].split("/", 1)[1].split("?")[0]
        if req.method == "GET" and path == "nodes":
            sel = dict(t.split("=") for t in req.query_value("sel").split(","))
            found = [n for n in self.nodes.values()
                     if all(n["labels"].get(k) == v for k, v in sel.items())]
            page = int(req.query_value("page"))
            return self.answer(200, {"nodes": found[(page - 1) * 2:page * 2]})
        if req.method == "POST":
            if self.refuse:
                return self.answer(*self.refuse)
            id = self.add(json.loads(req.body)["labels"])
            return self.answer(201, {"node": self.nodes[id]})
        id = path.split("/")[1]
        if id not in self.nodes:
            return self.answer(404, {"message": "no such node"})
        if req.method == "DELETE":
            del self.nodes[id]
            return self.answer(204, {})
        return self.answer(200, {"node": self.nodes[id]})

    @staticmethod
    def answer(status, body):
        return Response(status, [], json.dumps(body).encode(), "https://c/")


class Plugin(RestCloud):
    NAME, CLOUD = "test", "testcloud"
    PAGING = pages.Numbers("page", 2, None, "/nodes")
    ERRORS = (Rule(403, "limit", "quota"),)

    def __init__(self, cloud):
        self.transport = cloud

    def authorize(self, request):
        return request.bearer("t")

    def list(self, owner_id, request_id):
        sel = f"{tags.OWNER}={owner_id}" + (f",{tags.REQUEST}={request_id}" if request_id else "")
        return Request.get("https://c/nodes").query("sel", sel)

    def node_url(self, id):
        return f"https://c/nodes/{id}" if id.startswith("n-") else None

    def create(self, request, labels):
        return Request.post("https://c/nodes").json({"labels": labels})

    def handle(self, n):
        return NodeHandle(n["id"], labels=n["labels"])


def request(id="r-1", **boot):
    return ProvisionRequest(id, NodeShape(2.0, 4 << 30), BootData(**boot))


class Rest(unittest.TestCase):
    def setUp(self):
        self.cloud = Cloud()
        self.plugin = Plugin(self.cloud)

    def test_provision_looks_up_before_it_creates(self):
        first = checked_provision(self.plugin, "o", request())
        again = checked_provision(self.plugin, "o", request())
        self.assertEqual(first.provider_id, again.provider_id)
        self.assertEqual(len(self.cloud.nodes), 1)
        labels = self.cloud.nodes[first.provider_id]["labels"]
        self.assertEqual((labels[tags.OWNER], labels[tags.REQUEST]), ("o", "r-1"))
        self.assertEqual(labels[tags.REQUEST_DIGEST], tags.request_digest(request()))

    def test_a_request_id_reused_for_another_request_is_a_conflict(self):
        checked_provision(self.plugin, "o", request())
        other = request()
        other.shape.cpu = 4.0
        with self.assertRaises(Conflict):
            checked_provision(self.plugin, "o", other)

    def test_describe_reads_every_page_and_no_foreign_node(self):
        mine = {self.cloud.add({tags.OWNER: "o"}) for _ in range(5)}
        self.cloud.add({tags.OWNER: "other"})
        self.cloud.add({})
        self.assertEqual({n.provider_id for n in self.plugin.describe("o")}, mine)
        self.assertEqual(sum(1 for m, u in self.cloud.asked if "page=" in u), 3)

    def test_terminate_and_get_never_touch_another_owners_node(self):
        theirs = self.cloud.add({tags.OWNER: "other"})
        self.assertIsNone(self.plugin.get("o", theirs))
        self.assertRaises(NotFound, self.plugin.terminate, "o", theirs)
        self.assertIn(theirs, self.cloud.nodes)
        self.assertFalse(any(m == "DELETE" for m, _ in self.cloud.asked))
        self.assertRaises(NotFound, self.plugin.terminate, "o", "n-404")
        self.assertRaises(NotFound, self.plugin.terminate, "o", "not-an-id")
        mine = self.cloud.add({tags.OWNER: "o"})
        self.plugin.terminate("o", mine)
        self.assertNotIn(mine, self.cloud.nodes)

    def test_an_answer_naming_another_node_is_never_acted_on(self):
        mine = self.cloud.add({tags.OWNER: "o"})
        theirs = self.cloud.add({tags.OWNER: "other"})
        real = self.cloud.__call__

        def wrong_node(req):
            # GET /nodes/<theirs> answered with this owner's node.
            if req.method == "GET" and req.url.endswith("/nodes/" + theirs):
                return Cloud.answer(200, {"node": self.cloud.nodes[mine]})
            return real(req)
        self.plugin.transport = wrong_node
        self.assertIsNone(self.plugin.get("o", theirs))
        self.assertRaises(NotFound, self.plugin.terminate, "o", theirs)
        self.assertFalse(any(m == "DELETE" for m, _ in self.cloud.asked))
        self.assertEqual(set(self.cloud.nodes), {mine, theirs})
        self.plugin.terminate("o", mine)
        self.assertEqual(set(self.cloud.nodes), {theirs})

    def test_a_node_that_reads_back_as_anothers_is_an_error_not_made_nothing(self):
        real = self.cloud.__call__

        def relabelled(req):
            if req.method == "POST":
                body = json.loads(req.body)
                body["labels"][tags.OWNER] = "someone-else"
                req.body = json.dumps(body).encode()
            return real(req)
        self.plugin.transport = relabelled
        with self.assertRaises(Other) as e:
            self.plugin.provision("o", request())
        self.assertIn("reads back", e.exception.message)
        self.assertEqual(len(self.cloud.nodes), 1)

    def test_one_oversized_node_does_not_deny_the_owners_listing(self):
        from wasmprov_sdk import rest
        big = {tags.OWNER: "o", tags.REQUEST: "r-1", "big": "v" * (rest.MAX_HANDLE_LABEL_VALUE + 1),
               "": "v", "k" * (rest.MAX_HANDLE_LABEL_KEY + 1): "v"}
        big.update({f"user-{i:03}": "x" for i in range(rest.MAX_HANDLE_LABELS)})
        tagged = self.cloud.add(big)
        plain = self.cloud.add({tags.OWNER: "o"})
        listed = {n.provider_id: n for n in self.plugin.describe("o")}
        self.assertEqual(set(listed), {tagged, plain})
        labels = listed[tagged].labels
        self.assertEqual(len(labels), rest.MAX_HANDLE_LABELS)
        self.assertEqual((labels[tags.OWNER], labels[tags.REQUEST]), ("o", "r-1"))
        self.assertIn("user-000", labels)
        self.assertNotIn("big", labels)
        self.assertNotIn("", labels)

    def test_a_conflicting_create_returns_the_winner_and_errors_are_classified(self):
        self.cloud.refuse = (409, {"message": "taken"})
        self.assertRaises(Conflict, self.plugin.provision, "o", request())
        self.cloud.refuse = (403, {"message": "node limit reached"})
        self.assertRaises(Quota, self.plugin.provision, "o", request())

    def test_the_glue_refuses_what_the_provider_cannot_honour(self):
        for boot in [{"image": "debian"}, {"user_data": b"#!"}, {"ssh_keys": ["ssh-ed25519 AAAA"]}]:
            with self.assertRaises(Unsupported) as e:
                checked_provision(self.plugin, "o", request(**boot))
            self.assertIn(next(iter(boot)), e.exception.message)
        spot = request()
        spot.shape.capacity_type = "spot"
        self.assertRaises(Unsupported, checked_provision, self.plugin, "o", spot)
        self.assertRaises(Unsupported, checked_provision, self.plugin, "o", request("Bad Id"))
        self.assertEqual(self.cloud.asked, [], "refused before any request")
        self.plugin.BOOT = BootSupport.ALL
        node = checked_provision(self.plugin, "o", request(user_data=b"#!", ssh_keys=["k"]))
        self.assertIn(node.provider_id, self.cloud.nodes)


if __name__ == "__main__":
    unittest.main()
