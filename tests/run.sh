#!/usr/bin/env bash
# Installs what is missing (Debian 12), builds, and runs every test through ctest.
#   tests/run.sh                 unit + integration tests
#   BUILD_DIR=out tests/run.sh   build elsewhere
set -euo pipefail
cd "$(dirname "$0")/.."
source deploy/lib/common.sh

build_dir=${BUILD_DIR:-build}
hetpool_install_deps
hetpool_build "$build_dir"
# Unit tests run in parallel; integration tests are marked RUN_SERIAL (each starts a cluster).
ctest --test-dir "$build_dir" --output-on-failure -j2 --timeout 600
