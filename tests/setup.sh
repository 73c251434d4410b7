#!/usr/bin/env bash
# What the tests need beyond Rust, installed on a fresh machine: the wasm
# target guests build for, moto (the EC2 tests' server), the CNCF
# distribution registry and minisign (the install tests' registry and the
# signing tool whose signatures `wasmprov install` must accept), promtool
# (from the Debian prometheus package: the linter `/metrics` must pass), and the
# pinned builders of the Python and JavaScript plugins (componentize-py from
# PyPI, ComponentizeJS from npm, as locked in plugins/js/refcloud), and
# PyYAML (cloud-init's YAML reader, which the SDK's #cloud-config merge is
# tested against).
set -euo pipefail
cd "$(dirname "$0")/.."

rustup target add wasm32-wasip2
python3 -m pip install -q 'moto[server]' 'componentize-py==0.25.1' PyYAML
# `npm ci` refuses this lock (npm leaves out other platforms' optional packages); install follows it.
npm install --prefix plugins/js/refcloud --no-audit --no-fund --loglevel=error
if ! command -v docker-registry >/dev/null || ! command -v minisign >/dev/null \
    || ! command -v promtool >/dev/null; then
    if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends docker-registry minisign prometheus >/dev/null
fi
