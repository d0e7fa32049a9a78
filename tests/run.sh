#!/usr/bin/env bash
# Installs what is missing (Debian 12), builds, and runs every test through ctest.
#   tests/run.sh                 unit + integration tests
#   tests/run.sh --sanitize      the same, built with AddressSanitizer + UndefinedBehaviorSanitizer
#                                (in build-asan/; any report fails the test that triggered it)
#   --build-only                 install and build, run nothing
#   --tests-only                 run the tests of a build made before
#   BUILD_DIR=out tests/run.sh   build elsewhere; HETPOOL_BUILD_JOBS=1 builds with one job
set -euo pipefail
cd "$(dirname "$0")/.."
source deploy/lib/common.sh

sanitize=0 build=1 tests=1
for arg in "$@"; do
  case "$arg" in
    --sanitize) sanitize=1 ;;
    --build-only) tests=0 ;;
    --tests-only) build=0 ;;
    *) echo "usage: tests/run.sh [--sanitize] [--build-only | --tests-only]" >&2; exit 2 ;;
  esac
done

# Each step's time, in CI's log too (docs/security.md keeps the figures).
step_started=$SECONDS
step_done() {
  echo "tests/run.sh: $1 took $((SECONDS - step_started)) s"
  step_started=$SECONDS
}

[ "$build" -eq 1 ] && hetpool_install_deps
# The dashboard's browser tests drive Debian's Chromium with playwright-core from npm (not while
# only building: another run's tests may be using tests/web/node_modules).
if [ "$tests" -eq 1 ] && command -v npm >/dev/null; then
  npm ci --prefix tests/web --no-audit --no-fund --loglevel=error
fi
if [ "$sanitize" -eq 1 ]; then
  build_dir=${BUILD_DIR:-build-asan}
  # Warnings stay errors in the normal build; with ASan gcc 12 reports false -Wmaybe-uninitialized
  # in libstdc++ (std::regex), so here they are only warnings.
  # No benchmarks: no test runs them, and each would be one more instrumented link.
  step_done "installing what was missing"
  if [ "$build" -eq 1 ]; then
    hetpool_build "$build_dir" -DHETPOOL_SANITIZE=ON -DHETPOOL_WERROR=OFF -DHETPOOL_BENCHES=OFF
    step_done "the sanitizer build"
  fi
  # Every instrumented process (tests, and the daemons, agents and CLIs they start) writes its
  # reports, leaks at exit included, into one folder: any file there fails the run, even from a
  # process whose exit no test looks at.
  reports=$PWD/$build_dir/sanitizer-reports
  rm -rf "$reports" && mkdir -p "$reports"
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:log_path=$reports/asan}
  export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/sanitizer/lsan.supp:print_suppressions=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:log_path=$reports/ubsan}
else
  build_dir=${BUILD_DIR:-build}
  step_done "installing what was missing"
  if [ "$build" -eq 1 ]; then
    hetpool_build "$build_dir"
    step_done "the build"
  fi
fi
[ "$tests" -eq 1 ] || exit 0
status=0
if [ "$sanitize" -eq 1 ]; then
  # CI runs this after the plain suite within 90 minutes (docs/security.md has the figures), so:
  # the unit tests in one process (an instrumented process takes over a second to start, and
  # ctest would start 330), and every other test but the packaging check (90 s compressing
  # instrumented binaries) and these long, wait-bound ones, whose daemon code the unit tests and
  # shorter integration tests run under the sanitizers too; the plain suite runs them all.
  long_tests='^(HighAvailability\.KillingTheLeaderDuringASubmissionStorm.*|HighAvailability\.TheCliFindsTheLeader.*'
  long_tests+='|Elastic\..*|Preemption\.AHighPriorityJob.*'
  long_tests+='|PythonClient\..*|Stores/Crash\..*/etcd.*)$'
  "$build_dir/tests/unit_tests" --gtest_brief=1 || status=$?
  "$build_dir/tests/unit_process_tests" --gtest_brief=1 || status=$?
  ctest --test-dir "$build_dir" --output-on-failure -j2 --timeout 600 -LE '^(unit|unit-process|packaging|format)$' -E "$long_tests" ||
    status=$?
else
  # Unit tests run in parallel; integration tests are marked RUN_SERIAL (each starts a cluster).
  ctest --test-dir "$build_dir" --output-on-failure -j2 --timeout 600 || status=$?
fi
if [ "$sanitize" -eq 1 ]; then step_done "the tests under the sanitizers"; else step_done "the tests"; fi
if [ "$sanitize" -eq 1 ] && [ -n "$(ls -A "$reports")" ]; then
  echo "sanitizer reports in $reports:" >&2
  head -n 40 "$reports"/* >&2
  status=1
fi
exit $status
