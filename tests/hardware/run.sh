#!/usr/bin/env bash
# The hardware check (issue 47): on a machine with an NVIDIA card, does hetpool see, place, share,
# stop and size what the card really does? It starts hetpoold and one agent on the card (its
# vendor libraries, not a simulation) on 127.0.0.1 and prints one table:
#   inventory   hetpool-agent --print-inventory against nvidia-smi --query-gpu, field by field
#   CanRun      four nvcc -gencode builds of one kernel: hetpool's verdict at submit against
#               running each binary on the card
#   DDP         deploy/examples/train_ddp.py through daemon and agent on nccl
#   sharing     two device_milli 500 jobs running on one card at once
#   cancel      a running job cancelled: seconds until none of its processes holds the card
#   dirty       a process of no job holding the card keeps a job off it until it is gone; what a
#               finished job left holding the card does not outlive it
#   planner     `hetpoolctl plan` against a measured step and memory of a Llama-shaped model with
#               random weights (no download; tests/hardware/llama_step.py)
# Exit 0 when every row agrees (or when there is no card: it says so and skips), 1 otherwise.
# Takes 2-4 minutes. Run as root (the agent runs jobs under accounts of their own), after a build:
#   tests/hardware/run.sh                # binaries from build/src (HETPOOL_BIN to change)
# Binaries built on another machine run here when their non-glibc libraries travel with them
# (LD_LIBRARY_PATH). docs/hardware.md keeps the tables of the runs so far.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
repo=$PWD
here=$repo/tests/hardware

smi=${NVIDIA_SMI:-nvidia-smi}  # another for the test that it skips cleanly (tests/CMakeLists.txt)
if ! command -v "$smi" >/dev/null 2>&1 || ! "$smi" -L 2>/dev/null | grep -q '^GPU '; then
  echo "tests/hardware/run.sh: no NVIDIA card here (nvidia-smi lists none); skipping the hardware check"
  exit 0
fi
bin=${HETPOOL_BIN:-$repo/build/src}
for b in hetpoold hetpool-agent hetpoolctl; do
  [ -x "$bin/$b" ] || { echo "tests/hardware/run.sh: $bin/$b is missing: build first (tests/run.sh) or set HETPOOL_BIN" >&2; exit 1; }
done
python=${PYTHON:-python3}
if ! "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "tests/hardware/run.sh: $python has no PyTorch with CUDA; set PYTHON" >&2
  exit 1
fi
torchrun=${TORCHRUN:-$(command -v torchrun || true)}
[ -n "$torchrun" ] || { echo "tests/hardware/run.sh: no torchrun on PATH; set TORCHRUN" >&2; exit 1; }

run=$(mktemp -d /tmp/hetpool-hardware.XXXXXX)
chmod 711 "$run"  # job accounts reach their run directories below it, and nothing else
shared=$run/shared
mkdir -p "$shared"
cp deploy/examples/train_ddp.py "$here/llama_step.py" "$shared/"
chmod -R a+rwX "$shared"
rows=$run/rows.tsv
: >"$rows"
pids=()
stray=()
cleanup() {
  for p in "${stray[@]}"; do kill -9 "$p" 2>/dev/null; done
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  echo "logs and state kept in $run"
}
trap cleanup EXIT
started=$SECONDS

# A row of the table: check, expected, hetpool, the card, verdict (agree / DIFFER / skipped).
row() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >>"$rows"; }
agree() { [ "$1" = "$2" ] && echo agree || echo DIFFER; }
ctl() { "$bin/hetpoolctl" --insecure --server "$server" "$@"; }
# jq-less JSON: json FILE-or-- EXPR, EXPR a Python expression over `d`.
json() { "$python" -c "import json,sys; d=json.load(open(sys.argv[1]) if sys.argv[1] != '-' else sys.stdin); print($2)" "$1"; }
# Waits up to $1 seconds for the command after it to succeed.
wait_until() {
  local limit=$1
  shift
  local deadline=$((SECONDS + limit))
  until "$@"; do
    [ "$SECONDS" -ge "$deadline" ] && return 1
    sleep 0.2
  done
}
job_state() { ctl -o json get "$1" 2>/dev/null | json - "d.get('state', '')"; }
state_is() { [ "$(job_state "$1")" = "$2" ]; }
# Pids holding card $1 (its index), one a line.
card_pids() { "$smi" -i "$1" --query-compute-apps=pid --format=csv,noheader 2>/dev/null | tr -d ' '; }
submit() { (cd "$shared" && ctl submit -f "$1"); }

echo "== inventory: hetpool-agent --print-inventory against nvidia-smi"
"$bin/hetpool-agent" --backend auto --print-inventory >"$run/inventory.json" 2>"$run/print-inventory.log"
"$smi" --query-gpu=index,name,memory.total,compute_cap,driver_version,pci.bus_id \
  --format=csv,noheader,nounits >"$run/nvidia-smi.csv"
"$python" - "$run/inventory.json" "$run/nvidia-smi.csv" >>"$rows" <<'EOF'
import csv, json, sys
inv = json.load(open(sys.argv[1]))
cards = {d["index"]: d for d in inv.get("devices", []) if d.get("vendor") == "nvidia"}
smi = list(csv.reader(open(sys.argv[2]), skipinitialspace=True))
print(f"inventory: cards\t{len(smi)}\t{len(cards)}\t{len(smi)}\t{'agree' if len(cards) == len(smi) else 'DIFFER'}")
for index, name, memory, cc, driver, bus in smi:
    d = cards.get(int(index), {})
    cap = d.get("capability", {})
    pairs = [("model", d.get("model", "-"), name), ("memory MiB", str(d.get("memory_mib", "-")), memory),
             ("capability", f"{cap.get('arch_major', '-')}.{cap.get('arch_minor', '-')}", cc),
             ("driver", d.get("driver_version", "-"), driver),
             # nvidia-smi writes an 8-digit PCI domain, NVML's v2 id 4 digits.
             ("bus id", d.get("pci_bus_id", "-").lower()[-12:], bus.lower()[-12:])]
    for field, ours, theirs in pairs:
        print(f"inventory: gpu{index} {field}\t{theirs}\t{ours}\t{theirs}\t{'agree' if ours == theirs else 'DIFFER'}")
EOF
cards=$(json "$run/inventory.json" "len([x for x in d.get('devices', []) if x.get('vendor') == 'nvidia'])")
cc=$("$smi" -i 0 --query-gpu=compute_cap --format=csv,noheader | tr -d ' .')

echo "== starting hetpoold and an agent on the card(s) (logs in $run)"
"$bin/hetpoold" --insecure --listen 127.0.0.1:0 --data-dir "$run/daemon" --port-file "$run/port" \
  >"$run/hetpoold.log" 2>&1 &
pids+=($!)
wait_until 30 test -s "$run/port" || { cat "$run/hetpoold.log"; exit 1; }
server=127.0.0.1:$(cat "$run/port")
"$bin/hetpool-agent" --insecure --server "$server" --node-name hw-check --work-dir "$run/agent" \
  --job-dirs "$shared" --torchrun "$torchrun" --inventory-refresh 1s >"$run/agent.log" 2>&1 &
pids+=($!)
wait_until 60 bash -c "'$bin/hetpoolctl' --insecure --server $server -o json nodes 2>/dev/null | grep -q NODE_STATE_READY" ||
  { cat "$run/agent.log"; exit 1; }

echo "== CanRun: four nvcc -gencode builds, hetpool's verdict against the card's"
if command -v nvcc >/dev/null 2>&1; then
  # A cubin of another major architecture, the card's own, the card's arch-specific one (9.0a and
  # later; otherwise a cubin of a newer architecture), and PTX of an older one (JIT-compiled).
  if [ "${cc:0:1}" = 8 ]; then other=90; else other=80; fi
  builds=("sm_$other:arch=compute_$other,code=sm_$other" "sm_$cc:arch=compute_$cc,code=sm_$cc")
  if [ "$cc" -ge 90 ]; then builds+=("sm_${cc}a:arch=compute_${cc}a,code=sm_${cc}a"); else builds+=("sm_90:arch=compute_90,code=sm_90"); fi
  builds+=("compute_75:arch=compute_75,code=compute_75")
  for b in "${builds[@]}"; do
    code=${b%%:*}
    if ! nvcc -gencode "${b#*:}" -o "$shared/kernel-$code" "$here/kernel.cu" 2>"$run/nvcc-$code.log"; then
      row "CanRun: $code" "-" "-" "nvcc cannot build it" skipped
      continue
    fi
    if "$shared/kernel-$code" >"$run/kernel-$code.out" 2>&1; then card=ran; else card="fails: $(head -c 60 "$run/kernel-$code.out")"; fi
    kind=cuda_sass
    [[ $code == compute_* ]] && kind=cuda_ptx
    cat >"$run/canrun-$code.json" <<EOF
{"name": "canrun-$code", "command": ["$shared/kernel-$code"], "working_dir": "$shared", "nnodes": 1,
 "devices_per_node": 1, "requirements": {"vendors": ["nvidia"], "code": {"$kind": ["$code"]}}}
EOF
    if job=$(submit "$run/canrun-$code.json" 2>"$run/canrun-$code.err"); then
      ctl wait "$job" --timeout 120s >/dev/null 2>&1
      verdict=$(job_state "$job")
      [ "$verdict" = JOB_STATE_SUCCEEDED ] && ours=ran || ours="placed, $verdict"
    else
      ours="refused: $(tr '\n' ' ' <"$run/canrun-$code.err" | grep -o 'does not run.*' | head -c 50)"
    fi
    # Agreement: hetpool refuses exactly the builds that fail on the card.
    if [ "$card" = ran ]; then expect=ran; else expect=refused; fi
    got=${ours%%:*}
    row "CanRun: $code" "$expect" "$ours" "$card" "$(agree "$expect" "$got")"
  done
else
  row "CanRun" "-" "-" "no nvcc on PATH" skipped
fi

echo "== a DDP job through daemon and agent"
cat >"$run/ddp.json" <<EOF
{"name": "ddp", "python": {"script": "train_ddp.py", "args": ["--steps", "20"]}, "working_dir": "$shared",
 "nnodes": 1, "devices_per_node": $cards}
EOF
job=$(submit "$run/ddp.json")
begin=$SECONDS
ctl wait "$job" --timeout 180s >/dev/null 2>&1
state=$(job_state "$job")
backend=$(ctl logs "$job" --rank 0 2>/dev/null | grep -o 'backend=[a-z]* device=[a-z]*' | head -1)
row "DDP ($cards card(s))" "SUCCEEDED, backend=nccl device=cuda" "${state#JOB_STATE_}, $backend" \
  "$((SECONDS - begin)) s" "$(agree "SUCCEEDED, backend=nccl device=cuda" "${state#JOB_STATE_}, $backend")"

echo "== health signals (issue 61): NVML's Xid watch on the real card, and no signal from a healthy one"
watch=$(grep -o 'nvml health watch: .*' "$run/agent.log" | head -1)
row "health: Xid event watch" "Xid events on $cards of $cards card(s)" "${watch#nvml health watch: }" "-" \
  "$(agree "Xid events on $cards of $cards card(s)" "${watch#nvml health watch: }")"
signals=$(ctl -o json devices | json - "sum(len(v['device'].get('signals', [])) for v in d.get('devices', []))")
row "health: signals after the DDP job" "0" "$signals" "-" "$(agree 0 "$signals")"

echo "== two half-card jobs at once"
holder='import os, sys, time, torch
x = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
open(sys.argv[1], "w").close()
deadline = time.time() + 120
while not os.path.exists(sys.argv[2]) and time.time() < deadline: time.sleep(0.1)'
printf '%s\n' "$holder" >"$shared/hold.py"
halves=()
for half in a b; do
  cat >"$run/half-$half.json" <<EOF
{"name": "half-$half", "python": {"script": "hold.py", "args": ["$shared/ready-$half", "$shared/go-halves"]},
 "working_dir": "$shared", "nnodes": 1, "devices_per_node": 1, "device_milli": 500,
 "requirements": {"vendors": ["nvidia"]}}
EOF
  halves+=("$(submit "$run/half-$half.json")")
done
both=no
if wait_until 120 test -e "$shared/ready-a" -a -e "$shared/ready-b"; then
  card_a=$(ctl -o json get "${halves[0]}" | json - "d['placement'][0]['device_ids'][0]")
  card_b=$(ctl -o json get "${halves[1]}" | json - "d['placement'][0]['device_ids'][0]")
  [ "$card_a" = "$card_b" ] && both="yes, both on $card_a" || both="no: $card_a and $card_b"
fi
card_view=$("$smi" --query-compute-apps=pid,used_memory --format=csv,noheader | wc -l)
touch "$shared/go-halves"
for j in "${halves[@]}"; do ctl wait "$j" --timeout 60s >/dev/null 2>&1; done
row "sharing: 2 x device_milli 500" "yes, both on one card" "${both%% on *}, $(job_state "${halves[0]}" | sed 's/JOB_STATE_//')/$(job_state "${halves[1]}" | sed 's/JOB_STATE_//')" \
  "$card_view processes on the card(s)" "$(agree yes "${both%%,*}")"

echo "== cancel a running job"
rm -f "$shared/ready-c"
cat >"$run/cancel.json" <<EOF
{"name": "cancel", "python": {"script": "hold.py", "args": ["$shared/ready-c", "$shared/never"]},
 "working_dir": "$shared", "nnodes": 1, "devices_per_node": 1, "requirements": {"vendors": ["nvidia"]}}
EOF
job=$(submit "$run/cancel.json")
if wait_until 120 test -e "$shared/ready-c"; then
  index=$(ctl -o json get "$job" | json - "d['placement'][0]['device_ids'][0]" | tr -dc 0-9)
  ctl cancel "$job" >/dev/null
  t0=$(date +%s.%N)
  wait_until 30 test -z "$(card_pids "$index")"
  took=$("$python" -c "import time; print(f'{time.time() - $t0:.1f} s')")
  gone=$([ -z "$(card_pids "$index")" ] && echo yes || echo no)
  row "cancel" "nothing left on the card" "$(job_state "$job" | sed 's/JOB_STATE_//')" "card clear after $took: $gone" "$(agree yes "$gone")"
else
  row "cancel" "nothing left on the card" "never ran" "-" DIFFER
fi

echo "== a dirty card: a process of no job, then what a finished job left behind"
rm -f "$shared/ready-s"
"$python" "$shared/hold.py" "$shared/ready-s" "$shared/never" >"$run/stranger.log" 2>&1 &
stray+=($!)
wait_until 120 test -e "$shared/ready-s"
dirty_seen() { ctl -o json devices | json - "' '.join(x['device']['id'] for x in d.get('devices', []) if x['device'].get('dirty'))" | grep -q .; }
if wait_until 30 dirty_seen; then said=dirty; else said="not dirty"; fi
cat >"$run/after-dirty.json" <<EOF
{"name": "after-dirty", "command": ["/bin/true"], "working_dir": "$shared", "nnodes": 1,
 "devices_per_node": $cards, "requirements": {"vendors": ["nvidia"]}}
EOF
job=$(submit "$run/after-dirty.json")
held=no
wait_until 15 bash -c "'$bin/hetpoolctl' --insecure --server $server get $job | grep -q 'dirty'" && held=yes
kill -9 "${stray[0]}" 2>/dev/null
ctl wait "$job" --timeout 60s >/dev/null 2>&1
row "dirty: a stranger holds the card" "dirty, job held, then runs" "$said, held: $held, then $(job_state "$job" | sed 's/JOB_STATE_//')" \
  "pid ${stray[0]} held 512 MiB" "$(agree "dirty yes SUCCEEDED" "$said $held $(job_state "$job" | sed 's/JOB_STATE_//')")"

rm -f "$shared/ready-l"
cat >"$shared/leave.sh" <<EOF
setsid $python $shared/hold.py $shared/ready-l $shared/never </dev/null >/dev/null 2>&1 &
echo \$! >$shared/left.pid
while [ ! -e $shared/ready-l ]; do sleep 0.1; done
EOF
cat >"$run/leave.json" <<EOF
{"name": "leave", "command": ["/bin/sh", "$shared/leave.sh"], "working_dir": "$shared", "nnodes": 1,
 "devices_per_node": 1, "requirements": {"vendors": ["nvidia"]}}
EOF
job=$(submit "$run/leave.json")
ctl wait "$job" --timeout 120s >/dev/null 2>&1
left=$(cat "$shared/left.pid" 2>/dev/null)
outlived=yes
[ -n "$left" ] && wait_until 15 bash -c "! kill -0 $left 2>/dev/null" && outlived=no
how=$(ctl get "$job" | grep -o 'left on card.*\|process(es) the job left.*\|killed what.*' | head -1 | cut -c1-60)
row "dirty: a finished job's setsid grandchild" "gone when its job ends" "${how:-cgroup ended it}" \
  "pid ${left:-?} outlived its job: $outlived" "$(agree no "$outlived")"

echo "== the planner against a measured training step"
config=$here/tinyllama-1.1b.json
plan_args=(--config "$config" --mode train --seq 2048 --recompute none --attention flash
           --mixed-precision autocast --grad-accum 1 --cards 1 --pool "$run/inventory.json")
# The largest micro-batch the planner says fits the card.
micro=0
for mb in 8 4 2 1; do
  if ctl -o json plan "${plan_args[@]}" --micro-batch "$mb" >"$run/plan.json" 2>"$run/plan.err" &&
     [ "$(json "$run/plan.json" "d['plans'][0]['feasible']")" = True ]; then micro=$mb; break; fi
done
if [ "$micro" -gt 0 ] && CUDA_VISIBLE_DEVICES=0 "$python" "$shared/llama_step.py" --config "$config" \
     --micro-batch "$micro" >"$run/measured.json" 2>"$run/measured.err"; then
  step=$(json "$run/measured.json" "round(d['step_seconds'], 3)")
  planned=$(json "$run/plan.json" "round(d['plans'][0]['step_seconds'], 3)")
  off=$("$python" -c "print(f'{($planned - $step) / $step * 100:+.1f}%')")
  within=$("$python" -c "print('agree' if abs($planned - $step) <= 0.10 * $step else 'DIFFER')")
  row "planner: 1.1B step, mb $micro" "within 10%" "$planned s" "$step s ($off)" "$within"
  held_mib=$(json "$run/measured.json" "d['process_mib'] or round(d['reserved_mib'] + 512)")
  reserved=$(json "$run/measured.json" "round(d['reserved_mib'])")
  required=$(json "$run/plan.json" "round(d['plans'][0]['required_bytes'] / 2**20)")
  covers=$("$python" -c "print('agree' if $required >= $held_mib else 'DIFFER')")
  row "planner: 1.1B memory, mb $micro" "required >= held" "required $required MiB" \
    "held $held_mib MiB (reserved $reserved)" "$covers"
else
  row "planner" "-" "micro-batch $micro" "$(tail -c 80 "$run/measured.err" "$run/plan.err" 2>/dev/null | tr '\n' ' ')" DIFFER
fi

model=$("$smi" -i 0 --query-gpu=name --format=csv,noheader)
echo
echo "hetpool hardware check: $cards x $model, $("$smi" --query-gpu=driver_version --format=csv,noheader | head -1), $("$python" -c 'import torch; print("torch", torch.__version__)'), in $((SECONDS - started)) s"
echo
"$python" - "$rows" <<'EOF'
import sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
print("| check | expected | hetpool | the card | verdict |")
print("|---|---|---|---|---|")
for r in rows:
    print("| " + " | ".join(c.replace("|", "/") for c in r) + " |")
EOF
if grep -q $'\tDIFFER$' "$rows"; then
  echo "some rows DIFFER (logs in $run)"
  exit 1
fi
exit 0
