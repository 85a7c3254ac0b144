#!/usr/bin/env bash
# AdamW against 1-bit Adam under DDP over a slow link: two nodes on this machine
# (tests/integration/lib/two_nodes.sh: two network namespaces joined by a veth pair), one rank
# each, `xtrain launch --nnodes 2`, a ~25M parameter llama (hidden 512, 7 layers, fp32) whose
# gradient all-reduce dominates at 100 Mbit/s; global batch 2 of 16 tokens (little compute per step), one micro batch a rank.
# For each optimizer, at full speed and with the link throttled by tc (netem rate + delay, or tbf
# where the kernel has no netem):
#  - bytes across the link per step after the freeze: the veth's tx_bytes + rx_bytes (node 0's
#    end) around a run of SHORT and one of LONG steps, differenced (start-up and the warm-up
#    steps, which both runs share, drop out); 1-bit Adam freezes after step FREEZE < SHORT;
#  - step time: the median of the steps after SHORT of the LONG run;
#  - the loss of the last step.
# Expected per step: AdamW's all-reduce over 2 ranks sends each rank's whole gradient once each
# way (2 P across the link, P = parameter bytes); 1-bit Adam sends each rank's signs (P/32) in the
# all-to-all and the server's in the all-gather, half of each across: about 2 P / 32 in all.
# Needs root and iproute2 (ip, tc).
#   scripts/bench/onebit-adam.sh [--rate 100mbit] [--delay 1ms] [--freeze 2] [--short 4] [--long 8]
set -euo pipefail
cd "$(dirname "$0")/../.."
srcdir=$PWD
rate=100mbit delay=1ms freeze=2 short=4 long=8
while (($#)); do
  case $1 in
    --rate) rate=$2; shift 2 ;;
    --delay) delay=$2; shift 2 ;;
    --freeze) freeze=$2; shift 2 ;;
    --short) short=$2; shift 2 ;;
    --long) long=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
((long > short && short > freeze && freeze >= 1)) || { echo "need --long > --short > --freeze >= 1" >&2; exit 2; }
xtrain=${XTRAIN:-$srcdir/build/xtrain}
[[ -x $xtrain ]] || { bash scripts/build.sh > /dev/null; xtrain=$srcdir/build/xtrain; }
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
source tests/integration/lib/distributed.sh
source tests/integration/lib/expect.sh
source tests/integration/lib/two_nodes.sh
command -v tc > /dev/null || fail "tc (iproute2) is missing"
work=$(mktemp -d)
trap 'remove_nodes; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
make_nodes "xo$$"

cat > "$work/recipe.yaml" <<YAML
name: onebit-bench
model:
  hidden_size: 512
  num_layers: 7
  num_heads: 8
  num_kv_heads: 8
  intermediate_size: 1536
data:
  seq_len: 16
train:
  global_batch_size: 2
  micro_batch_size: 1
  log_every: 100
  threads: 1
optim:
  lr: 1.0e-3
  warmup_steps: 2
  freeze_step: $freeze
parallel:
  dp: 2
  fsdp: 1
checkpoint:
  every: 0
YAML

link_note="full speed"
throttle() {
  local i
  for i in 0 1; do
    in_node "$i" tc qdisc del dev "${node_if[i]}" root 2> /dev/null || true
    [[ $1 == on ]] || continue
    if in_node "$i" tc qdisc add dev "${node_if[i]}" root netem rate "$rate" delay "$delay" 2> /dev/null; then
      link_note="netem rate $rate delay $delay"
    else
      in_node "$i" tc qdisc add dev "${node_if[i]}" root tbf rate "$rate" burst 128kb latency 100ms
      link_note="tbf rate $rate (this kernel has no netem: no added delay)"
    fi
  done
}

# run_ddp NAME PORT [train args...]: 2 nodes x 1 rank.
run_ddp() {
  local name=$1 port=$2 node status=0
  shift 2
  node_pids=()
  for node in 0 1; do
    in_node "$node" "$xtrain" launch --nnodes 2 --node-rank "$node" --nproc-per-node 1 --master-addr "${node_addr[0]}" \
      --master-port "$port" -- train "$work/recipe.yaml" --set run.dir="$work/$name" "$@" \
      > "$work/$name.node$node.log" 2>&1 &
    node_pids+=($!)
  done
  for node in 0 1; do wait "${node_pids[node]}" || status=$?; done
  node_pids=()
  [[ $status == 0 ]] || { tail -n 40 "$work/$name".node*.log; fail "$name exited $status"; }
}

# step_stats RUN FIRST: the median step time of steps FIRST.. and the last step's loss.
step_stats() {
  "$python" - "$work/$1/metrics.jsonl" "$2" <<'PY'
import json, statistics, sys
records = [r for r in map(json.loads, open(sys.argv[1])) if "step_s" in r]
times = [r["step_s"] for r in records if r["step"] >= int(sys.argv[2])]
print(f"{statistics.median(times):.3f} {records[-1]['loss']:.4f}")
PY
}

declare -A per_step step_s loss
port=29500
for speed in full throttled; do
  throttle "$([[ $speed == throttled ]] && echo on || echo off)"
  for optimizer in adamw onebit_adam; do
    crossed=()
    for steps in "$short" "$long"; do
      before=$(link_bytes)
      run_ddp "$optimizer-$speed-$steps" "$port" --set optim.name="$optimizer" --set train.steps="$steps"
      crossed+=($(($(link_bytes) - before)))
      port=$((port + 10))
    done
    per_step[$optimizer-$speed]=$(((crossed[1] - crossed[0]) / (long - short)))
    read -r step_s[$optimizer-$speed] loss[$optimizer-$speed] <<< "$(step_stats "$optimizer-$speed-$long" $((short + 1)))"
  done
done
throttle off
parameters=$("$xtrain" validate "$work/recipe.yaml" | grep -o '# parameters: .*' | cut -d' ' -f3)

echo "DDP over two nodes x 1 rank, a llama of $parameters parameters; $(nproc) cores; throttled: $link_note"
echo "per step after the freeze (step $freeze): steps $((short + 1))..$long"
printf '%-12s | %-12s | %-12s | %-15s | %-18s | %s\n' optimizer "MB full" "MB throttled" "step full (s)" "step throttled (s)" "loss at $long (full)"
for optimizer in adamw onebit_adam; do
  awk -v o="$optimizer" -v m="${per_step[$optimizer-full]}" -v t="${per_step[$optimizer-throttled]}" \
    -v f="${step_s[$optimizer-full]}" -v s="${step_s[$optimizer-throttled]}" -v l="${loss[$optimizer-full]}" \
    'BEGIN { printf "%-12s | %-12.2f | %-12.2f | %-15s | %-18s | %s\n", o, m / 1e6, t / 1e6, f, s, l }'
done
awk -v a="${per_step[adamw-throttled]}" -v b="${per_step[onebit_adam-throttled]}" \
  -v sa="${step_s[adamw-throttled]}" -v sb="${step_s[onebit_adam-throttled]}" \
  'BEGIN { printf "1-bit Adam: %.1fx fewer bytes across the link, %.2fx faster steps at the throttled rate\n", a / b, sa / sb }'
