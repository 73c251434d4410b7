"""Error answers to contract errors (`wasmprov_guest::classify`)."""

import unittest

from wasmprov_sdk.classify import ErrorAt, Rule, classify, error_message
from wasmprov_sdk.http import Response


def resp(status, body="", headers=()):
    return Response(status, list(headers), body.encode(), "https://x/")


class Classify(unittest.TestCase):
    def test_statuses_have_defaults_and_rules_come_first(self):
        def kind(status, body="", rules=()):
            return classify(resp(status, body), "GET /", rules).kind
        self.assertEqual(kind(401), "auth")
        self.assertEqual(kind(404), "not_found")
        self.assertEqual(kind(410), "not_found")
        self.assertEqual(kind(409), "conflict")
        self.assertEqual(kind(422), "unsupported")
        self.assertEqual(kind(503), "transport")
        rules = (Rule(403, "rate", "rate_limited"), Rule(None, "insufficient capacity", "capacity_in_zone"))
        self.assertEqual(kind(403, '{"message":"Rate exceeded"}', rules), "rate_limited")
        self.assertEqual(kind(403, '{"message":"forbidden"}', rules), "auth")
        e = classify(resp(400, '{"error":{"code":"x","message":"Insufficient capacity"}}'), "GET /", rules)
        self.assertEqual((e.kind, e.scope), ("capacity", "zone"))

    def test_rate_limits_carry_the_wait_and_messages_are_found(self):
        e = classify(resp(429, '{"id":"too_many_requests","message":"slow"}', [("retry-after", "7")]),
                     "GET /v2/droplets")
        self.assertEqual((e.kind, e.retry_after_ms), ("rate_limited", 7000))
        self.assertIn("GET /v2/droplets (HTTP 429): too_many_requests: slow", e.message)
        self.assertEqual(error_message(b'{"errors":[{"code":"E1","message":"bad"}]}'), "E1: bad")
        self.assertEqual(error_message(b"<html>oops</html>"), "<html>oops</html>")
        self.assertEqual(len(error_message(b"x" * 400)), 301)
        self.assertEqual(error_message(b'{"error":{"code":"quota_exceeded","message":"m"}}'),
                         "quota_exceeded: m")


class Pointers(unittest.TestCase):
    def test_a_cloud_says_where_its_errors_are(self):
        linode = ErrorAt(("/errors/0/reason",), ("/errors/0/field",))
        body = '{"errors":[{"reason":"Linode limit reached for this account"}]}'
        e = classify(resp(400, body), "POST /v4/linode/instances", (Rule(400, "limit", "quota"),), linode)
        self.assertEqual(e.kind, "quota")
        self.assertTrue(e.message.endswith("(HTTP 400): Linode limit reached for this account"))
        self.assertIn("errors", error_message(body.encode()), "the default reads raw JSON")


if __name__ == "__main__":
    unittest.main()
