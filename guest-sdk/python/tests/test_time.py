"""Times and passwords as the Rust SDK reads and makes them (the parity test
compares them byte for byte; these are the cases that once differed)."""

import unittest

from wasmprov_sdk import random, time


class Times(unittest.TestCase):
    def test_rfc3339_is_read_as_the_rust_sdk_reads_it(self):
        self.assertEqual(time.rfc3339_ms("2025-06-01T14:00:00+02:00"), 1_748_779_200_000)
        for bad in ("２016-01-01T00:00:00Z", "2016-01-01T00:00:00+24:00",
                    "2016-01-01T00:00:00+00:99", "2016-12-30T23:59:60Z", "1969-12-31T23:59:59Z"):
            self.assertIsNone(time.rfc3339_ms(bad), bad)
        # A leap second at the end of a month is the millisecond before the next.
        self.assertEqual(time.rfc3339_ms("2016-12-31T23:59:60Z"), 1_483_228_799_999)

    def test_naive_epoch_and_any_forms(self):
        self.assertEqual(time.naive_utc_ms("1970-01-01 00:00:01.25"), 1250)
        self.assertIsNone(time.naive_utc_ms("1970-01-01T00:00:01Z"))
        self.assertEqual(time.epoch_seconds_ms("12.5"), 12_500)
        self.assertIsNone(time.epoch_seconds_ms("1e3"))
        for form in ("2016-01-30T23:55:00+00:00", "2016-01-30T23:55:00", "1454198100"):
            self.assertEqual(time.any_ms(form), 1_454_198_100_000, form)


class Passwords(unittest.TestCase):
    def test_passwords_have_every_class_and_differ(self):
        seen = set()
        for n in (1, 8, 32, 128):
            p = random.password(n)
            self.assertEqual(len(p), max(n, 8))
            for cls in (random._LOWER, random._UPPER, random._DIGIT, random._SYMBOL):
                self.assertTrue(any(c in cls for c in p), p)
            seen.add(p)
        self.assertEqual(len(seen), 4)
        self.assertEqual(len(random.password_from(12, lambda n: bytes([7] * n))), 12)


if __name__ == "__main__":
    unittest.main()
