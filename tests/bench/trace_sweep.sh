#!/usr/bin/env bash
# Every workload variant of the trace x scheduler profiles, 10 seeds each (the FGD paper's
# protocol). Prints one line per (workload, profile); docs/benchmarks.md records the output.
#   tests/bench/trace_sweep.sh [BUILD_DIR] [TRACE_DIR] [PROFILE...]
# PROFILE: "default" (hetpoold's) or a profile file; without any, default and every file in
# scheduler/profiles/. JOBS=N runs N replays at once (default 1).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build}
trace=${2:-$root/../shared/traces/alibaba-gpu-v2023/csv}
shift $(( $# < 2 ? $# : 2 ))
profiles=("$@")
if [ ${#profiles[@]} -eq 0 ]; then
  profiles=(default "$root"/scheduler/profiles/*.json)
fi
if [ ! -d "$trace" ]; then
  echo "trace_sweep: $trace not found (the trace lives in ../shared, beside the repository)" >&2
  exit 2
fi
for file in "$trace"/openb_pod_list_*.csv; do
  workload=$(basename "$file" .csv)
  workload=${workload#openb_pod_list_}
  for profile in "${profiles[@]}"; do
    printf '%s\0%s\0' "$workload" "$profile"
  done
done | xargs -0 -n 2 -P "${JOBS:-1}" sh -c \
  '"$0" --trace-dir "$1" --workload "$2" --seeds 42-51 --scheduler-profile "$3"' "$build/tests/trace_replay" "$trace"
