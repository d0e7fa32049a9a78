#!/usr/bin/env bash
# hetpool quickstart on one Debian 12 machine: installs what it needs, builds, makes a CA and
# certificates (deploy/pki.sh) and a user token, starts hetpoold with its embedded store and two
# agents simulating a mixed NVIDIA / MetaX / Cambricon pool on 127.0.0.1, all over mutual TLS,
# submits the example DDP job across 2 nodes x 2 processes as that user, waits for it, prints its
# state and the loss from its logs, the same job in each vendor's container image through podman
# (as root: docs/containers.md), then the example job across vendors (H100s and MLU370s in one
# job, its batch split by speed: docs/mixed-vendor.md), and stops everything. Run as root, the agents start the job's
# processes under a uid of the user's own (the default for users without a mapped account).
set -euo pipefail
cd "$(dirname "$0")/.."
source deploy/lib/common.sh

build_dir=${BUILD_DIR:-build}
hetpool_install_deps
hetpool_build "$build_dir"
bin=$(realpath "$build_dir/src")
repo=$PWD

run_dir=$(mktemp -d /tmp/hetpool-quickstart.XXXXXX)
pids=()
cleanup() {
  # Agents first: they stop their jobs' processes on SIGTERM.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  echo "logs and state kept in $run_dir"
}
trap cleanup EXIT

chmod 711 "$run_dir"  # job accounts reach their run directories below it, and nothing else
pki=$run_dir/pki
echo "== certificates in $pki (deploy/pki.sh) and a token for user 'quickstart'"
deploy/pki.sh init-ca "$pki" >/dev/null
deploy/pki.sh server "$pki" hetpoold >/dev/null
for node in node-a node-b; do deploy/pki.sh node "$pki" "$node" >/dev/null; done
export HETPOOL_TLS_CA=$pki/ca.pem
HETPOOL_TOKEN=$("$bin/hetpoolctl" admin token --file "$run_dir/tokens.json" --user quickstart --group demo --role user)
export HETPOOL_TOKEN

echo "== starting hetpoold (data in $run_dir/daemon)"
"$bin/hetpoold" --listen 127.0.0.1:0 --data-dir "$run_dir/daemon" --port-file "$run_dir/port" \
  --tls-ca "$pki/ca.pem" --tls-cert "$pki/hetpoold.pem" --tls-key "$pki/hetpoold.key" \
  --tokens "$run_dir/tokens.json" >"$run_dir/hetpoold.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$run_dir/port" ] && break; sleep 0.1; done
[ -s "$run_dir/port" ] || { cat "$run_dir/hetpoold.log"; exit 1; }
export HETPOOL_SERVER=127.0.0.1:$(cat "$run_dir/port")
echo "   listening on $HETPOOL_SERVER"

# The job's files live in a directory the agents let jobs use (--job-dirs), readable by the
# account the job runs as, and writable as a scratch directory is (sticky, like /tmp): scripts
# save their checkpoints in their working dir.
shared=$run_dir/shared
mkdir -p "$shared/deploy/examples"
cp deploy/examples/train_ddp.py deploy/examples/train_mixed.py "$shared/deploy/examples/"
mkdir -p "$shared/python/hetpool"
cp python/hetpool/__init__.py python/hetpool/dist.py "$shared/python/hetpool/"  # hetpool.dist, torch only
chmod -R a+rX "$shared"
chmod 1777 "$shared"
# Jobs in container images (docs/containers.md): as root with podman, one local image per vendor
# (here all three the same: the host's PyTorch, mounted read-only), run through runc with the
# containers.conf this machine needs (cgroup v1: no default ulimits, no pids limit).
runtime_flags=(--container-runtime none)
if [ "$(id -u)" -eq 0 ] && command -v podman >/dev/null && [ -x /usr/sbin/runc ]; then
  printf '[containers]\ndefault_ulimits = []\npids_limit = 0\n' >"$run_dir/containers.conf"
  for image in torch-cuda torch-maca torch-mlu; do
    deploy/examples/make_torch_image.sh "localhost/hetpool-example/$image:1" "$run_dir/containers.conf"
  done
  runtime_flags=(--container-runtime /usr/bin/podman --container-runtime-args=--runtime=/usr/sbin/runc
                 --containers-conf "$run_dir/containers.conf" --container-mount-dirs /usr)
fi
for node in node-a node-b; do
  "$bin/hetpool-agent" --node-name "$node" --work-dir "$run_dir/$node" \
    --tls-ca "$pki/ca.pem" --tls-cert "$pki/$node.pem" --tls-key "$pki/$node.key" --job-dirs "$shared" \
    "${runtime_flags[@]}" \
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
job=$(cd "$shared" && "$bin/hetpoolctl" submit -f "$repo/deploy/examples/ddp-job.json")
echo "   $job"
status=0
"$bin/hetpoolctl" wait "$job" --timeout 600s || status=$?

echo "== job"
"$bin/hetpoolctl" get "$job"
echo "== loss (rank 0)"
"$bin/hetpoolctl" logs "$job" --rank 0 | grep -E "loss" | sed -n '1p;$p'

if [ "${runtime_flags[1]}" != none ]; then
  echo "== submitting deploy/examples/image-job.json (the same training, each vendor's image through podman)"
  imaged=$(cd "$shared" && "$bin/hetpoolctl" submit -f "$repo/deploy/examples/image-job.json")
  echo "   job $imaged"
  "$bin/hetpoolctl" wait "$imaged" --timeout 600s || status=$?
  "$bin/hetpoolctl" get "$imaged" | grep -E "^(state|placement):|^  (image|runtime argv):" | cut -c1-200
  "$bin/hetpoolctl" logs "$imaged" --rank 0 | grep -E "final loss"
else
  echo "== skipping deploy/examples/image-job.json: it needs root, podman and runc"
fi
echo "== what would serving llama-2-7b to 8 users take on this pool? (docs/planner.md)"
"$bin/hetpoolctl" plan --model llama-2-7b --mode infer --batch 8 --context 4096 || true

echo "== submitting deploy/examples/mixed-job.json (H100s and MLU370s in one job: docs/mixed-vendor.md)"
mixed=$(cd "$shared" && "$bin/hetpoolctl" submit -f "$repo/deploy/examples/mixed-job.json")
echo "   $mixed"
"$bin/hetpoolctl" wait "$mixed" --timeout 600s || status=$?
"$bin/hetpoolctl" get "$mixed" | grep -E "^(state|vendor|collective|batch|placement):"
"$bin/hetpoolctl" logs "$mixed" --rank 0 | grep -E "final loss"
echo "== training llama-2-7b on all of it, modelled (hetpoolctl plan --mixed)"
"$bin/hetpoolctl" plan --model llama-2-7b --mode train --grad-accum 32 --mixed || true
exit $status
