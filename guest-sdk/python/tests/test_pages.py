"""Every way a list pages, bounded (`wasmprov_guest::pages`)."""

import json
import unittest

from wasmprov_sdk import pages
from wasmprov_sdk.errors import Transport
from wasmprov_sdk.http import Request, Response


def run(paging, first, serve):
    asked, bodies = [], []

    def send(req):
        asked.append(req.url)
        body, headers = serve(req)
        return Response(200, headers, json.dumps(body).encode(), req.url)
    pages.walk(first, paging, send, bodies.append)
    return asked, bodies


class Paging(unittest.TestCase):
    def test_page_numbers_follow_the_body(self):
        paging = pages.Numbers("page", 2, "/meta/next", "/items")

        def serve(req):
            page = int(req.query_value("page"))
            return {"items": [1, 2], "meta": {"next": page + 1 if page < 3 else None}}, []
        asked, _ = run(paging, Request.get("https://x/s?sel=a%3Db").query("per_page", "2"), serve)
        self.assertEqual(len(asked), 3)
        self.assertEqual(Request.get(asked[2]).query_value("sel"), "a=b")
        self.assertEqual(Request.get(asked[2]).query_value("page"), "3")

    def test_a_short_page_is_the_last_without_a_pointer(self):
        paging = pages.Numbers("page", 2, None, "/items")
        asked, _ = run(paging, Request.get("https://x/s"),
                       lambda r: ({"items": [1, 2] if r.query_value("page") == "1" else [3]}, []))
        self.assertEqual(len(asked), 2)

    def test_a_count_of_pages_asks_exactly_that_many(self):
        for items, want in [(1000, 2), (1001, 3), (0, 1), (499, 1)]:
            pages_ = max(-(-items // 500), 1)
            asked, _ = run(pages.Pages("page", "/pages"), Request.get("https://x/l?page_size=500"),
                           lambda r: ({"data": [], "pages": pages_}, []))
            self.assertEqual(len(asked), want, items)
        with self.assertRaises(Transport) as e:
            run(pages.Pages("page", "/pages"), Request.get("https://x/l"),
                lambda r: ({"pages": "many"}, []))
        self.assertIn("not a number", e.exception.message)

    def test_a_list_that_changes_while_it_is_read_fails_the_walk(self):
        def walk(serve):
            return run(pages.Pages("page", "/pages"), Request.get("https://x/l"),
                       lambda r: (serve(int(r.query_value("page"))), []))
        cases = [(lambda p: {"page": p, "pages": 4 - min(p, 2)}, "changed"),
                 (lambda p: {"page": 1, "pages": 2}, "page 2 was asked"),
                 (lambda p: {"page": p, "data": []}, "no number of pages"),
                 (lambda p: {"page": p, "pages": 2 ** 64}, "not a number"),
                 (lambda p: {"page": True, "pages": 2}, "page 1 was asked")]
        for serve, why in cases:
            with self.assertRaises(Transport) as e:
                walk(serve)
            self.assertIn(why, e.exception.message)
        self.assertEqual(len(walk(lambda p: {"page": p, "pages": 3})[0]), 3)
        self.assertEqual(len(walk(lambda p: {"pages": 2})[0]), 2)

    def test_next_urls_links_and_tokens(self):
        asked, _ = run(pages.NextUrl("/links/next"), Request.get("https://x/a"),
                       lambda r: ({"links": {"next": "https://x/a?p=2" if r.url.endswith("/a") else None}}, []))
        self.assertEqual(asked, ["https://x/a", "https://x/a?p=2"])
        asked, _ = run(pages.LinkHeader(), Request.get("https://x/a"),
                       lambda r: ({}, [("link", '<https://x/b>; rel="next", <https://x/a>; rel="first"')]
                                  if r.url.endswith("/a") else []))
        self.assertEqual(asked, ["https://x/a", "https://x/b"])
        asked, _ = run(pages.Token("cursor", "/next"), Request.get("https://x/a"),
                       lambda r: ({"next": "" if r.query_value("cursor") else "c 1"}, []))
        self.assertEqual(Request.get(asked[1]).query_value("cursor"), "c 1")

    def test_a_page_named_twice_or_forever_stops_the_walk(self):
        with self.assertRaises(Transport) as e:
            run(pages.NextUrl("/next"), Request.get("https://x/a"), lambda r: ({"next": "https://x/a"}, []))
        self.assertIn("already read", e.exception.message)
        with self.assertRaises(Transport):
            run(pages.Numbers("page", 1, "/next", "/items"), Request.get("https://x/a"),
                lambda r: ({"next": "two"}, []))
        n = [0]

        def endless(r):
            n[0] += 1
            return {"next": f"https://x/{n[0]}"}, []
        with self.assertRaises(Transport) as e:
            run(pages.NextUrl("/next"), Request.get("https://x/a"), endless)
        self.assertIn("more than 1000 pages", e.exception.message)


if __name__ == "__main__":
    unittest.main()
