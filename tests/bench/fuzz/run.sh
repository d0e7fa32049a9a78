#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) in build-fuzz/ and runs each for a
# bounded time, seeded from the repository's own examples. Findings (crash-*, leak-*, timeout-*)
# land in build-fuzz/findings/<target>/; the summary goes to build-fuzz/fuzz-summary.txt.
#   tests/bench/fuzz/run.sh                 600 s per target (the figure in docs/security.md)
#   FUZZ_SECONDS=60 tests/bench/fuzz/run.sh  a quick pass
#   FUZZ_JOBS=2 ...                          targets run two at a time
#   FUZZ_TARGETS="fuzz_request" ...          only these targets
set -euo pipefail
cd "$(dirname "$0")/../../.."
seconds=${FUZZ_SECONDS:-600}
jobs=${FUZZ_JOBS:-1}
build=${FUZZ_BUILD_DIR:-build-fuzz}
read -r -a targets <<<"${FUZZ_TARGETS:-fuzz_job_spec fuzz_inventory fuzz_config fuzz_request fuzz_logs_and_reports}"

command -v clang++ >/dev/null || { echo "run.sh: needs clang (apt-get install clang)" >&2; exit 2; }
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHETPOOL_FUZZ=ON \
  -DHETPOOL_WERROR=OFF >/dev/null
cmake --build "$build" -j2 --target "${targets[@]}"

# Seeds: real files of each format (the config seeds carry their parser's selector byte).
seed() {  # seed TARGET SELECTOR-BYTE|"" FILE...
  local target=$1 selector=$2
  shift 2
  mkdir -p "$build/corpus/$target"
  for f in "$@"; do
    [ -f "$f" ] || continue
    if [ -n "$selector" ]; then
      { printf "\\x$selector"; cat "$f"; } >"$build/corpus/$target/$(basename "$f").$selector"
    else
      cp "$f" "$build/corpus/$target/"
    fi
  done
}
seed fuzz_job_spec "" deploy/examples/ddp-job.json
seed fuzz_inventory "" deploy/examples/node-a.json deploy/examples/node-b.json
seed fuzz_config 01 deploy/examples/quotas.json
seed fuzz_config 03 deploy/scheduler-profile.json
seed fuzz_config 04 deploy/examples/prices.json
mkdir -p "$build/corpus/fuzz_request" "$build/corpus/fuzz_logs_and_reports"

run_one() {
  local target=$1
  local findings="$build/findings/$target"  # (one `local` would expand $target before setting it)
  mkdir -p "$findings"
  "$build/tests/bench/fuzz/$target" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$findings/" "$build/corpus/$target" >"$build/$target.log" 2>&1 || true
  local execs crashes
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/$target.log" | grep -o '[0-9]*$' || echo 0)
  crashes=$(find "$findings" -type f | wc -l)
  printf '%-16s %4ss  %12s executions  %3s findings\n' "$target" "$seconds" "$execs" "$crashes"
}
export -f run_one
export build seconds
: >"$build/fuzz-summary.txt"
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one {}' | tee -a "$build/fuzz-summary.txt"
! grep -qv ' 0 findings$' "$build/fuzz-summary.txt"
