#!/usr/bin/env bash
# Every crate an embedder or a plugin author needs builds from its packaged
# `.crate` alone, and the CLI installs and runs (docs/PACKAGING.md):
#
# 1. `cargo install --path host/cli` from this checkout, then its `demo`.
# 2. The bundled plugins' components are staged in host/cli/components/
#    (git-ignored), which the `wasmprov` package carries.
# 3. Every publishable crate is packaged (`cargo package`), unpacked in a
#    scratch directory and built there as one workspace whose
#    `[patch.crates-io]` points at the other unpacked crates, as if they had
#    come from crates.io; the packaged CLI is installed and runs `demo`.
# 4. `wasmprov new --crates-io` makes a plugin crate that depends on versions
#    only; it builds and passes its own test against the packaged crates.
#
# Everything shares the workspace's target directory (and the scratch
# workspace copies its profiles and lock file), so registry crates such as
# wasmtime are not built again: only the wasmprov crates are, from their
# packages. The packaged CLI's binary replaces target/debug/wasmprov until
# the checkout's next build puts its own back.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"

# The publishable crates, dependencies first.
crates=(
    wasmprov-api
    wasmprov-policy
    wasmprov-host
    wasmprov-fleet
    wasmprov-fake
    wasmprov-guest
    wasmprov-guest-build
    wasmprov-plugin-digitalocean
    wasmprov-fake-digitalocean
    wasmprov-testkit
    wasmprov-compat-zlayer
    wasmprov-autoscaler
    wasmprov
)
# The plugins the CLI bundles (host/cli/build.rs), as the guest build names them.
bundled=(hetzner aws-ec2 cloud-init digitalocean)

scratch=$(mktemp -d "${TMPDIR:-/tmp}/wasmprov-package.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
step() { printf '\n== %s (%ss)\n' "$1" "$SECONDS"; }

step "the README gives embedders the workspace's profile lines for Cranelift"
python3 - <<'PY'
import re, sys, tomllib
profiles = tomllib.load(open("Cargo.toml", "rb"))["profile"]["dev"]["package"]
fast = [name for name, p in profiles.items() if p.get("opt-level") == 2]
readme = open("README.md").read()
missing = [n for n in fast if f"[profile.dev.package.{n}]\nopt-level = 2\n" not in readme]
if not fast or missing:
    sys.exit(f"README.md's embedding section lacks the opt-level = 2 lines of: {missing}")
PY

step "cargo install --path host/cli, then demo"
cargo install --debug --locked --path host/cli --root "$scratch/checkout"
"$scratch/checkout/bin/wasmprov" demo >"$scratch/demo.out"
tail -n 3 "$scratch/demo.out"

step "stage the bundled components in host/cli/components/"
# The same build (and so the same bytes) as the CLI's build script makes.
guests="$root/target/wasm-guests"
args=()
for p in "${bundled[@]}"; do args+=(-p "wasmprov-plugin-$p"); done
# The guest profile is wasmprov_guest_build::guest_profile's (LTO, one unit).
CARGO_TARGET_DIR="$guests" CARGO_PROFILE_RELEASE_LTO=fat CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 \
    cargo build --release --target wasm32-wasip2 "${args[@]}"
rm -rf host/cli/components
mkdir host/cli/components
for p in "${bundled[@]}"; do
    f="wasmprov_plugin_${p//-/_}.wasm"
    cp "$guests/wasm32-wasip2/release/$f" "host/cli/components/$f"
done

step "cargo package"
args=()
for c in "${crates[@]}"; do args+=(-p "$c"); done
# --allow-dirty: the staged components are generated, never committed.
# --no-verify: verified below, in one workspace that shares the target
# directory's profiles (cargo's own check would build each package alone).
cargo package --no-verify --allow-dirty "${args[@]}"
version=$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "wasmprov"))')

step "unpack and build in $scratch/crates"
work="$scratch/crates"
mkdir -p "$work"
members=""
patch=""
for c in "${crates[@]}"; do
    tar -xzf "$CARGO_TARGET_DIR/package/$c-$version.crate" -C "$work"
    members+="    \"$c-$version\",\n"
    patch+="$c = { path = \"$c-$version\" }\n"
done
# Cargo packs files with a fixed old time; a fingerprint of an earlier run
# (same relative paths) would take changed sources for unchanged ones.
find "$work" -type f -exec touch {} +
{
    printf '[workspace]\nresolver = "3"\nmembers = [\n%b]\n\n' "$members"
    printf '[patch.crates-io]\n%b\n' "$patch"
    # The workspace's profiles, so that what it built is reused.
    awk '/^\[/ { keep = ($0 ~ /^\[profile[.]/) } keep' Cargo.toml
} >"$work/Cargo.toml"
cp Cargo.lock "$work/Cargo.lock"
(cd "$work" && cargo build --workspace)

step "cargo install the packaged CLI, then demo"
(cd "$work" && cargo install --debug --locked --path "wasmprov-$version" --root "$scratch/packaged")
"$scratch/packaged/bin/wasmprov" demo >"$scratch/demo.out"
tail -n 3 "$scratch/demo.out"

step "wasmprov new --crates-io: a plugin on versions only, against the packages"
mkdir -p "$scratch/author/.cargo"
# What crates.io would serve: the packaged crates an author's crate uses.
{
    printf '[patch.crates-io]\n'
    for c in wasmprov-api wasmprov-guest wasmprov-fake; do
        printf '%s = { path = "%s" }\n' "$c" "$work/$c-$version"
    done
} >"$scratch/author/.cargo/config.toml"
# A name of its own: the CLI's tests build `acme-cloud` in the same target directory.
new="$scratch/author/packaged-check"
"$scratch/packaged/bin/wasmprov" new packaged-check --crates-io --path "$new" >/dev/null
if grep -nE '^[^#]*path *=' "$new/Cargo.toml" | grep -v '"fake/main.rs"'; then
    echo "the new crate's Cargo.toml names a path" >&2
    exit 1
fi
(cd "$new" && WASMPROV="$scratch/packaged/bin/wasmprov" cargo test)

step "done"
