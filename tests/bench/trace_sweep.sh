#!/usr/bin/env bash
# Every workload variant of the trace x the policies, 10 seeds each (the FGD paper's protocol).
# Prints one line per (workload, policy); docs/benchmarks.md records the output.
#   tests/bench/trace_sweep.sh [BUILD_DIR] [TRACE_DIR]
set -euo pipefail
build=${1:-build}
trace=${2:-$(cd "$(dirname "$0")/../.." && pwd)/../shared/traces/alibaba-gpu-v2023/csv}
for file in "$trace"/openb_pod_list_*.csv; do
  workload=$(basename "$file" .csv)
  workload=${workload#openb_pod_list_}
  for policy in random bestfit packing fgd default; do
    "$build/tests/trace_replay" --trace-dir "$trace" --workload "$workload" --seeds 42-51 --policy "$policy"
  done
done
