#!/usr/bin/env bash
# Installs what is missing (Debian 12), builds, and runs every test through ctest.
#   tests/run.sh                 unit + integration tests
#   tests/run.sh --sanitize      the same, built with AddressSanitizer + UndefinedBehaviorSanitizer
#                                (in build-asan/; any report fails the test that triggered it)
#   BUILD_DIR=out tests/run.sh   build elsewhere
set -euo pipefail
cd "$(dirname "$0")/.."
source deploy/lib/common.sh

sanitize=0
for arg in "$@"; do
  case "$arg" in
    --sanitize) sanitize=1 ;;
    *) echo "usage: tests/run.sh [--sanitize]" >&2; exit 2 ;;
  esac
done

hetpool_install_deps
# The dashboard's browser tests drive Debian's Chromium with playwright-core from npm.
if command -v npm >/dev/null; then
  npm ci --prefix tests/web --no-audit --no-fund --loglevel=error
fi
if [ "$sanitize" -eq 1 ]; then
  build_dir=${BUILD_DIR:-build-asan}
  hetpool_build "$build_dir" -DHETPOOL_SANITIZE=ON
  # Leaks are reported at exit by every process (daemon, agents, CLI, tests); halt_on_error makes
  # the first report fail the test. gRPC's and protobuf's process-lifetime singletons are not leaks.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:abort_on_error=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
else
  build_dir=${BUILD_DIR:-build}
  hetpool_build "$build_dir"
fi
# Unit tests run in parallel; integration tests are marked RUN_SERIAL (each starts a cluster).
ctest --test-dir "$build_dir" --output-on-failure -j2 --timeout 600
