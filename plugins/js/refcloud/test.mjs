// Builds refcloud-js.wasm from app.js and runs wasmprov's conformance suite on
// it, under the sandbox, against wasmprov's fake of the reference cloud:
// plain and with faults. Run: npm test
//
// Needs `npm install` (the pinned ComponentizeJS) and the `wasmprov` binary (on
// PATH, or in WASMPROV).

import { test, before } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const name = "refcloud-js";
const wasm = join(here, `${name}.wasm`);

function suite(...extra) {
  const exe = process.env.WASMPROV || "wasmprov";
  const out = spawnSync(
    exe,
    ["test", "--component", wasm, "--manifest", join(here, `${name}.toml`), "--fake", "refcloud", ...extra],
    { encoding: "utf8" },
  );
  if (out.error) {
    assert.fail(`no \`wasmprov\` binary (WASMPROV=..., else on PATH): ${out.error.message}`);
  }
  assert.equal(out.status, 0, out.stdout + out.stderr);
  assert.match(out.stdout, /PASSED/);
}

before(() => {
  execFileSync("npm", ["run", "-s", "build"], { cwd: here, stdio: "inherit" });
  // What the plugin needs, embedded for `wasmprov install` and `inspect`.
  execFileSync(process.env.WASMPROV || "wasmprov", ["declare", wasm, "--capabilities", join(here, "capabilities.toml")]);
});

test("conformance", () => suite());
test("conformance under faults", () => suite("--faults", "default"));
