"""Cheapest fitting type, boot data and times."""

import unittest

from wasmprov_sdk import GIB, SPOT, BootData, NodeShape, boot, shape, time
from wasmprov_sdk.errors import Capacity, Unsupported

TYPES = [shape.InstanceType("small", 2.0, 4 * GIB, 0.02, spot=0.008, zones=["a", "b"]),
         shape.InstanceType("big", 8.0, 32 * GIB, 0.16, zones=["a"]),
         shape.InstanceType("gpu", 8.0, 64 * GIB, 1.1, gpu=1, gpu_vendor="NVIDIA", zones=["b"])]


class Shapes(unittest.TestCase):
    def test_cheapest_fit_and_the_refusals(self):
        self.assertEqual(shape.pick(NodeShape(1.0, GIB), TYPES)[0].name, "small")
        self.assertEqual(shape.pick(NodeShape(4.0, GIB), TYPES), (TYPES[1], 0.16))
        self.assertEqual(shape.pick(NodeShape(1.0, GIB, gpu=1, gpu_vendor="nvidia"), TYPES)[0].name, "gpu")
        self.assertEqual(shape.pick(NodeShape(1.0, GIB, capacity_type=SPOT), TYPES)[1], 0.008)
        self.assertRaises(Unsupported, shape.pick, NodeShape(64.0, GIB), TYPES)
        self.assertRaises(Unsupported, shape.pick, NodeShape(1.0, GIB, arch="arm64"), TYPES)
        self.assertRaises(Unsupported, shape.pick, NodeShape(instance_type="nope"), TYPES)
        with self.assertRaises(Capacity) as e:
            shape.pick(NodeShape(4.0, GIB, zone="c"), TYPES)
        self.assertEqual(e.exception.scope, "zone")
        self.assertRaises(Capacity, shape.pick, NodeShape(4.0, GIB, capacity_type=SPOT), TYPES)
        self.assertEqual(shape.offerings(TYPES)[2].gpu_vendor, "nvidia")


class Boot(unittest.TestCase):
    def test_user_data_is_refused_rather_than_mangled(self):
        self.assertEqual(boot.user_data_text(BootData(user_data=b"#!/bin/sh")), "#!/bin/sh")
        self.assertRaises(Unsupported, boot.user_data_text, BootData(user_data=b"\xff"))
        self.assertEqual(boot.user_data_base64(BootData(user_data=b"\xff\x00")), "/wA=")
        self.assertRaises(Unsupported, boot.user_data_base64, BootData(user_data=b"x" * 100), 64)
        self.assertIsNone(boot.user_data_text(BootData()))
        self.assertEqual(boot.ssh_key_identity("ssh-ed25519 AAAA ops@laptop"), "ssh-ed25519 AAAA")


class Times(unittest.TestCase):
    def test_cloud_spellings_parse(self):
        self.assertEqual(time.rfc3339_ms("1970-01-01T00:00:01Z"), 1000)
        self.assertEqual(time.rfc3339_ms("2025-06-01T12:00:00.250Z"), 1_748_779_200_250)
        self.assertEqual(time.rfc3339_ms("2025-06-01T14:00:00+02:00"), 1_748_779_200_000)
        for bad in ["yesterday", "1969-12-31T23:59:59Z", None, "2025-13-01T00:00:00Z"]:
            self.assertIsNone(time.rfc3339_ms(bad), bad)


if __name__ == "__main__":
    unittest.main()
