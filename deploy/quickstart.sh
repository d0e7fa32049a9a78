#!/usr/bin/env bash
# hetpool quickstart on one Debian 12 machine: installs what it needs, builds, starts hetpoold with
# its embedded store and two agents simulating a mixed NVIDIA / MetaX / Cambricon pool on
# 127.0.0.1, submits the example DDP job across 2 nodes x 2 processes, waits for it, prints its
# state and the loss from its logs, and stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
source deploy/lib/common.sh

build_dir=${BUILD_DIR:-build}
hetpool_install_deps
hetpool_build "$build_dir"
bin=$build_dir/src

run_dir=$(mktemp -d /tmp/hetpool-quickstart.XXXXXX)
pids=()
cleanup() {
  # Agents first: they stop their jobs' processes on SIGTERM.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  echo "logs and state kept in $run_dir"
}
trap cleanup EXIT

echo "== starting hetpoold (data in $run_dir/daemon)"
"$bin/hetpoold" --listen 127.0.0.1:0 --data-dir "$run_dir/daemon" --port-file "$run_dir/port" \
  >"$run_dir/hetpoold.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$run_dir/port" ] && break; sleep 0.1; done
[ -s "$run_dir/port" ] || { cat "$run_dir/hetpoold.log"; exit 1; }
export HETPOOL_SERVER=127.0.0.1:$(cat "$run_dir/port")
echo "   listening on $HETPOOL_SERVER"

for node in node-a node-b; do
  "$bin/hetpool-agent" --node-name "$node" --work-dir "$run_dir/$node" \
    --backend sim --inventory "deploy/examples/$node.json" >"$run_dir/$node.log" 2>&1 &
  pids+=($!)
done
for _ in $(seq 100); do
  [ "$("$bin/hetpoolctl" -o json nodes | grep -c NODE_STATE_READY)" -eq 2 ] && break
  sleep 0.2
done

echo "== the pool"
"$bin/hetpoolctl" nodes
"$bin/hetpoolctl" devices

echo "== submitting deploy/examples/ddp-job.json (2 nodes x 2 processes)"
job=$("$bin/hetpoolctl" submit -f deploy/examples/ddp-job.json)
echo "   $job"
status=0
"$bin/hetpoolctl" wait "$job" --timeout 600s || status=$?

echo "== job"
"$bin/hetpoolctl" get "$job"
echo "== loss (rank 0)"
"$bin/hetpoolctl" logs "$job" --rank 0 | grep -E "loss" | sed -n '1p;$p'
echo "== what would serving llama-2-7b to 8 users take on this pool? (docs/planner.md)"
"$bin/hetpoolctl" plan --model llama-2-7b --mode infer --batch 8 --context 4096 || true
exit $status
