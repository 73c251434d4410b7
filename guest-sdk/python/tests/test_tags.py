"""Ids and tags: the syntax, the codecs' round trips, and the reductions.
(That they give the Rust SDK's bytes is `guest-sdk/tests/python_sdk.rs`.)"""

import unittest

from wasmprov_sdk import tags
from wasmprov_sdk.errors import InvalidConfig, Unsupported
from wasmprov_sdk.model import BootData, NodeShape, ProvisionRequest

SAMPLES = ["", "a", "X", "XX", "X41", "x41", ":", "a:b", "wasmprov-owner", "team_a-1",
           "web server", "ünïcödé ✓", "%41", "a.b/c", "\x1b[2J", "X3A", "--"]


class Ids(unittest.TestCase):
    def test_the_syntax_table(self):
        for good in ["a", "0", "web-1", "web_1", "a-_-b", "a--b", "a_b__c", "x" * 63,
                     "0b0c8f3e-5d5c-4f7a-9c39-1d3f7a3c2b11"]:
            self.assertTrue(tags.is_valid_id(good), good)
            tags.check_request_id(good)
            tags.check_owner_id(good)
        for bad in ["", "-", "_a", "a_", "-a", "a-", "A", "web-A", "a.b", "a/b", "a b", "a:b",
                    "ñ", "a\0", "a\n", "x" * 64]:
            self.assertFalse(tags.is_valid_id(bad), repr(bad))
            self.assertRaises(Unsupported, tags.check_request_id, bad)
            self.assertRaises(InvalidConfig, tags.check_owner_id, bad)

    def test_errors_name_the_id_and_stay_short(self):
        with self.assertRaises(Unsupported) as e:
            tags.check_request_id("Z" * 100_000)
        self.assertLess(len(e.exception.message), 300)
        self.assertIn("...", e.exception.message)
        with self.assertRaises(InvalidConfig) as e:
            tags.check_owner_id("Host A")
        self.assertIn('owner id "Host A"', e.exception.message)


class Codecs(unittest.TestCase):
    def test_round_trip_and_never_collide(self):
        for codec in (tags.LABEL_VALUE, tags.DIGITALOCEAN.codec):
            seen = {}
            for s in SAMPLES:
                e = codec.encode(s)
                self.assertTrue(all(c in codec.alphabet for c in e), e)
                self.assertEqual(codec.decode(e), s)
                self.assertNotIn(e, seen, f"{s!r} and {seen.get(e)!r}")
                seen[e] = s

    def test_flat_tags_split_at_the_first_separator(self):
        t = tags.DIGITALOCEAN
        self.assertEqual(t.encode("role", "web server: eu"), "role:webX20serverX3AX20eu")
        for k in SAMPLES:
            for v in SAMPLES:
                self.assertEqual(t.decode(t.encode(k, v)), (k, v))
        self.assertEqual(t.encode_all({"a:b": "c"}), ["aX3Ab:c"])
        for foreign in ["production", "k:Xz1", "k:X4", "k:X61", "k:X3a", "k:a b", "k:XFF", "k:a:b"]:
            self.assertIsNone(t.decode(foreign), foreign)

    def test_too_long_is_an_error_not_a_truncation(self):
        self.assertRaises(tags.TooLong, tags.LABEL_VALUE.encode, "a" * 64)
        self.assertRaises(Unsupported, tags.DIGITALOCEAN.encode, "k", "é" * 50)
        tags.DIGITALOCEAN.encode("k", "a" * 253)

    def test_ids_are_stored_unchanged(self):
        for id in ["owner-1", "req_2", "a", "0-9_z", "a--b", "x" * 63]:
            self.assertEqual(tags.LABEL_VALUE.encode(id), id)
            self.assertEqual(tags.DIGITALOCEAN.encode(tags.REQUEST, id), f"{tags.REQUEST}:{id}")


class Presets(unittest.TestCase):
    def test_long_ids_take_the_hashed_long_form_and_read_back(self):
        linode = tags.Preset.LINODE
        id = "r" * 63
        labels = {tags.REQUEST: id, tags.OWNER: "team-a", "a": ""}
        written = linode.encode_all(labels)
        self.assertTrue(all(3 <= len(t) <= 50 for t in written), written)
        self.assertIn(linode.selector(tags.REQUEST, id), written)
        self.assertEqual(linode.decode_all(written), labels)
        self.assertEqual(linode.list_selector("team-a", None), f"{tags.OWNER}:team-a")
        # A piece missing, or a foreign hash tag: not misread.
        pieces = linode.encode(tags.REQUEST, id)
        self.assertNotIn(tags.REQUEST, linode.decode_all(pieces[:-1]))
        self.assertFalse(linode.matches([f"{tags.REQUEST}::0000000000000000"] + pieces[1:],
                                        tags.REQUEST, id))


class Names(unittest.TestCase):
    def test_hostnames_are_valid_and_distinct(self):
        self.assertEqual(tags.hostname("wp", "req-1", b"req-1"), "wp-req-1")
        names = [tags.hostname("wp", t, t.encode()) for t in ["req_1", "req.1", "x" * 100, "___",
                                                               "a--b", "-a-"]]
        self.assertEqual(len(set(names)), len(names))
        for n in names:
            self.assertTrue(tags.is_hostname_label(n), n)

    def test_label_values_are_safe(self):
        for s in ["Req/1", "x" * 100, "---", "..a..", "ünï"]:
            v = tags.label_value(s)
            self.assertLessEqual(len(v), 63)
            self.assertTrue(v[0].isalnum() and v[-1].isalnum(), v)
        self.assertEqual(tags.label_value("owner-1"), "owner-1")
        self.assertNotEqual(tags.label_value("Req/1"), tags.label_value("req-1"))

    def test_pair_tokens_are_distinct(self):
        ids = ["req-1", "req_1", "a", "a-b", "a_b", "ab", "x" * 63, "x" * 62]
        tokens = {tags.pair_token(o, r, 64) for o in ids for r in ids}
        self.assertEqual(len(tokens), len(ids) ** 2)
        self.assertTrue(all(len(t) <= 64 for t in tokens))


class Digest(unittest.TestCase):
    def test_host_labels_are_not_the_request(self):
        r = ProvisionRequest("r-1", NodeShape(2.0, 4 << 30))
        plain = tags.request_digest(r)
        r.shape.labels.update({tags.JOURNAL: "k7m2q4x6b3c5d-1", tags.OWNER: "o"})
        self.assertEqual(tags.request_digest(r), plain)
        r.shape.labels["role"] = "web"
        self.assertNotEqual(tags.request_digest(r), plain)
        r2 = ProvisionRequest("r-1", NodeShape(2.0, 4 << 30), BootData(user_data=b"#!"))
        self.assertNotEqual(tags.request_digest(r2), plain)
        labels = tags.node_labels("o", "r-1", tags.request_labels(r))
        self.assertEqual((labels[tags.OWNER], labels[tags.REQUEST]), ("o", "r-1"))
        self.assertEqual(len(labels[tags.REQUEST_DIGEST]), 16)

    def test_floats_are_written_as_serde_json_writes_them(self):
        cases = {1.0: "1.0", 0.5: "0.5", 1e16: "1e+16", 1.5e16: "1.5e+16", 1e15: "1000000000000000.0",
                 1e-5: "0.00001", 1e-7: "1e-7", 1.25e-7: "1.25e-7", -2.0: "-2.0", 0.0: "0.0",
                 123456789.125: "123456789.125", float("nan"): "null"}
        for x, want in cases.items():
            self.assertEqual(tags._json_f64(x), want, x)


class Hostnames(unittest.TestCase):
    def test_ids_whose_32_bit_names_collided_get_distinct_names(self):
        ids = ["batch-2026-11-24-pool-gpu-workers-eu-central-u8kbtbz92n",
               "batch-2026-11-24-pool-gpu-workers-eu-central-y8y41oq3cl"]
        keys = [f'Some("fleet-a")/{i}'.encode() for i in ids]
        self.assertEqual(tags.short_hash(keys[0]), tags.short_hash(keys[1]))
        names = [tags.hostname_with_hash("wasmprov", i, k) for i, k in zip(ids, keys)]
        self.assertNotEqual(names[0], names[1])
        for n in names:
            self.assertTrue(tags.is_hostname_label(n) and "--" not in n and len(n) <= 64, n)


class Claims(unittest.TestCase):
    def test_two_claims_for_one_key_are_nobodys_whatever_their_order(self):
        a, b = "a" * 63, "a" * 62 + "b"
        for p in (tags.Preset.LINODE, tags.Preset.DIGITALOCEAN, tags.Preset.VULTR):
            for key in (tags.OWNER, tags.REQUEST, "role"):
                forms = [p.encode(key, "a"), p.encode(key, a)], [p.encode(key, "b"), p.encode(key, b)]
                journal = p.encode(tags.JOURNAL, "k7m2q4x6b3c5d-1")
                for x in forms[0]:
                    for y in forms[1]:
                        for t in (x + y + journal, list(reversed(x + y + journal))):
                            got = p.decode_all(t)
                            self.assertNotIn(key, got, t)
                            self.assertIn(tags.JOURNAL, got)
                self.assertEqual(p.decode_all(p.encode(key, "a") * 2)[key], "a")

    def test_case_folded_tags_still_name_the_owner_and_request(self):
        labels = {tags.OWNER: "fleet-b", tags.REQUEST: "r" * 63, "role": "web"}
        for p in (tags.Preset.LINODE, tags.Preset.DIGITALOCEAN):
            written = p.encode_all(labels)
            for fold in (str.upper, str.lower):
                got = p.decode_all([fold(t) for t in written])
                self.assertEqual((got.get(tags.OWNER), got.get(tags.REQUEST)),
                                 ("fleet-b", "r" * 63))
            self.assertEqual(p.decode_all(["ROLE:WEB"]), {"ROLE": "WEB"})
        self.assertNotIn(tags.OWNER, tags.Preset.VULTR.decode_all(["WASMPROV-OWNER:FLEET-B"]))


if __name__ == "__main__":
    unittest.main()
