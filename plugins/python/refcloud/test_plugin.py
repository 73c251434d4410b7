"""Builds refcloud-py.wasm from app.py and runs wasmprov's conformance suite on
it, under the sandbox, against wasmprov's fake of the reference cloud:
plain and with faults. Run: python3 -m unittest

Needs componentize-py (pip install componentize-py==0.25.1) and the
`wasmprov` binary (on PATH, or in WASMPROV).
"""

import os
import shutil
import subprocess
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "refcloud-py"
WORLD = "wasmprov:provisioner/provider@0.2.0"
# The contract: beside this file in a new plugin, at the top of a wasmprov checkout here.
WIT = next(d for d in (os.path.join(HERE, "wit"), os.path.join(HERE, "../../../wit"))
           if os.path.isdir(d))
# The Python SDK (package `wasmprov_sdk`): beside this file in a new plugin,
# in the checkout's guest-sdk/python here.
SDK = next(d for d in (HERE, os.path.join(HERE, "../../../guest-sdk/python"))
           if os.path.isdir(os.path.join(d, "wasmprov_sdk")))


def wasmprov() -> str:
    exe = os.environ.get("WASMPROV") or shutil.which("wasmprov")
    if not exe:
        raise AssertionError(
            "no `wasmprov` binary (WASMPROV=..., else on PATH): install it "
            "(cargo install --path host/cli in a wasmprov checkout) or set WASMPROV")
    return exe


class Conformance(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.wasm = os.path.join(HERE, f"{NAME}.wasm")
        subprocess.run(
            ["componentize-py", "-d", WIT, "-w", WORLD,
             "componentize", "app", "-p", HERE, "-p", SDK, "-o", cls.wasm],
            cwd=HERE, check=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        # What the plugin needs, embedded for `wasmprov install` and `inspect`.
        subprocess.run(
            [wasmprov(), "declare", cls.wasm, "--capabilities", os.path.join(HERE, "capabilities.toml")],
            check=True, capture_output=True)

    def suite(self, *extra: str) -> None:
        out = subprocess.run(
            [wasmprov(), "test", "--component", self.wasm,
             "--manifest", os.path.join(HERE, f"{NAME}.toml"), "--fake", "refcloud", *extra],
            capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("PASSED", out.stdout)

    def test_conformance(self) -> None:
        self.suite()

    def test_conformance_under_faults(self) -> None:
        self.suite("--faults", "default")


if __name__ == "__main__":
    unittest.main()
