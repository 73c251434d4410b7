"""HTTP decisions (`wasmprov_guest::http`): what a wasi:http error code
means for the caller, the wait a rate-limited answer asks for, requests."""

import unittest

from wasmprov_sdk import http
from wasmprov_sdk.errors import InvalidConfig, RateLimited, Transport


def code(name):
    """A stand-in for the binding class `ErrorCode_<name>` (decided by name)."""
    return type(f"ErrorCode_{name}", (), {})()


class ErrorCodes(unittest.TestCase):
    def test_codes_map_to_what_the_caller_should_do(self):
        self.assertIsInstance(http.http_error("u", code("ConnectionLimitReached")), RateLimited)
        self.assertTrue(http.http_error("u", code("ConnectionLimitReached")).retryable)
        for name in ["ConnectionTimeout", "ConnectionReadTimeout", "DnsTimeout",
                     "ConnectionRefused", "ConnectionTerminated"]:
            e = http.http_error("u", code(name))
            self.assertIsInstance(e, Transport, name)
            self.assertTrue(e.retryable)
        for name in ["HttpRequestDenied", "DestinationIpProhibited"]:
            e = http.http_error("u", code(name))
            self.assertIsInstance(e, InvalidConfig, name)
            self.assertFalse(e.retryable)

    def test_timeouts_say_which_fired(self):
        body = http.http_error("https://x/", code("ConnectionReadTimeout"), in_body=True).message
        self.assertIn("body timeout", body)
        self.assertTrue(body.endswith("https://x/: ErrorCode::ConnectionReadTimeout"), body)
        first = http.http_error("https://x/", code("ConnectionReadTimeout")).message
        self.assertIn("first-byte timeout: the connection was made", first)
        self.assertIn("no connection was made", http.http_error("u", code("DnsTimeout")).message)

    def test_urls(self):
        self.assertEqual(http.split_url("https://h:8/a?b=1"), ("https", "h:8", "/a?b=1"))
        self.assertEqual(http.split_url("http://h?x"), ("http", "h", "?x"))
        self.assertEqual(http.split_url("http://h"), ("http", "h", "/"))
        for bad in ["h/a", "ftp://h/", "https:///a"]:
            self.assertRaises(InvalidConfig, http.split_url, bad)


class Waits(unittest.TestCase):
    def test_retry_after_forms(self):
        now = 1_445_412_480
        self.assertEqual(http.retry_after_ms("120", now), 120_000)
        self.assertEqual(http.retry_after_ms(" 0 ", now), 0)
        self.assertEqual(http.retry_after_ms("Wed, 21 Oct 2015 07:28:30 GMT", now), 30_000)
        self.assertEqual(http.retry_after_ms("Wed, 21 Oct 2015 07:27:00 GMT", now), 0)
        self.assertIsNone(http.retry_after_ms("soon", now))

    def test_rate_limit_headers(self):
        now = 1_700_000_000
        self.assertEqual(http.wait_ms([("Retry-After", "3")], now), 3000)
        self.assertEqual(http.wait_ms([("ratelimit-reset", "9"), ("retry-after", "2")], now), 2000)
        self.assertEqual(http.wait_ms([("RateLimit-Reset", "30")], now), 30_000)
        self.assertEqual(http.wait_ms([("ratelimit-reset", "1700000005")], now), 5000)
        self.assertEqual(http.wait_ms([("X-RateLimit-Reset", "1699999990")], now), 0)
        self.assertEqual(http.wait_ms([("x-ratelimit-reset", "1.5")], now), 1500)
        for bad in ["soon", "-1", "NaN", "inf"]:
            self.assertIsNone(http.wait_ms([("ratelimit-reset", bad)], now), bad)
        self.assertIsNone(http.wait_ms([("ratelimit-remaining", "0")], now))


class Requests(unittest.TestCase):
    def test_requests_show_what_they_carry(self):
        r = http.Request.get("https://x/v2/droplets?a=1").query("tag name", "k:v").bearer("t")
        self.assertEqual(r.query_value("tag name"), "k:v")
        self.assertEqual(r.query_value("a"), "1")
        self.assertIsNone(r.query_value("b"))
        self.assertEqual(r.headers[0], ("authorization", "Bearer t"))
        self.assertEqual(http.encode("a b&c=d/é-_.~"), "a%20b%26c%3Dd%2F%C3%A9-_.~")
        j = http.Request.post("https://x/").json({"a": [1]})
        self.assertEqual((j.body, j.headers), (b'{"a":[1]}', [("content-type", "application/json")]))
        self.assertEqual(r.headers[0], ("authorization", "Bearer t"), "builders do not mutate")

    def test_malformed_answers_are_transport_errors(self):
        resp = http.Response(200, [], b"<html>", "https://x/")
        with self.assertRaises(Transport) as e:
            resp.json()
        self.assertIn("https://x/", e.exception.message)


if __name__ == "__main__":
    unittest.main()
