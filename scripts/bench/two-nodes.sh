#!/usr/bin/env bash
# What crosses the network between two nodes, per training step, and what a slow link costs.
# Two nodes on this machine (tests/integration/lib/two_nodes.sh: two network namespaces joined by
# a veth pair, addresses only inside them), 2 ranks each, `xtrain launch --nnodes 2`, a 3M
# parameter llama (hidden 256, 4 layers, fp32), global batch 8 of 64 tokens, one micro batch a
# rank. For FSDP 4, HSDP 2x2 and TP 2 x FSDP 2:
#  - bytes across the link per step: the veth's tx_bytes + rx_bytes (node 0's end) around a run
#    of SHORT and one of LONG steps; the difference over LONG - SHORT steps leaves out start-up
#    (rendezvous, group creation, the final checkpoint), which both runs share;
#  - expected: what the layout's collectives send across nodes, from the model's parameter bytes
#    and Gloo's algorithms (below);
#  - step time (median of steps 2..LONG) at full speed and with the link throttled by tc
#    (netem rate + delay where the kernel has netem, else tbf: the rate alone).
# Needs root and iproute2 (ip, tc).
#   scripts/bench/two-nodes.sh [--rate 200mbit] [--delay 1ms] [--short 2] [--long 6]
#
# Expected bytes. P = parameter bytes (fp32); a block is one shard unit, the embeddings one and the
# final norm + output projection one. Per step FSDP all-gathers every unit before its forward and
# every block but the last again before its backward (parallel.reshard_after_forward; the
# embedding's backward needs no weights): G = P + (L - 1) x block. Every unit's gradient is
# reduced once: R = P. Ranks 0,1 are node 0 and ranks 2,3 node 1. Gloo's collectives:
#  - all-gather = one broadcast per rank of its shard (lib/parallel/process_groups.cpp), and
#    Gloo's broadcast is a binomial tree (virtual rank v = rank - root: 0->1, then 0->2 and
#    1->3). Over 4 ranks the trees of roots 0..3 have 2, 3, 2, 3 edges across the nodes: 10
#    shards of G/4 = 2.5 G. (Ring all-gather would send 1.5 G; the least possible is G.)
#  - reduce-scatter = Gloo's all-reduce of the whole gradient (process_groups.cpp), a ring in
#    which rank r sends to r - 1: 2 of its 4 edges cross, each carrying 2 x 3/4 R: 3 R.
#  - all-reduce over 2 ranks on two nodes: each rank sends the other its half, then the reduced
#    half: each sends the buffer once, both across.
#  FSDP 4:         2.5 G + 3 R
#  HSDP 2x2:       shard groups {0,1} {2,3} stay in a node; the replica groups {0,2} {1,3}
#                  all-reduce their gradient shards (R/2 each): 2 groups x 2 ranks x R/2 = 2 R
#  TP 2 x FSDP 2:  tp groups {0,1} {2,3} stay in a node; each fsdp group {0,2} {1,3} holds one
#                  tp half (norm weights whole in both): gathers, 2 broadcasts of a half shard,
#                  each across: G_tp; reduce, 2 ranks each sending their half's gradient: 2 R_tp.
#                  Summed over the two groups: G' + 2 R', where ' counts the norms twice.
# Not counted: TCP/IP headers and acknowledgements, Gloo's message headers, the per-step
# all-reduces of the loss and gradient norm (a few floats), heartbeats to the store on node 0.
set -euo pipefail
cd "$(dirname "$0")/../.."
srcdir=$PWD
rate=200mbit delay=1ms short=2 long=6
while (($#)); do
  case $1 in
    --rate) rate=$2; shift 2 ;;
    --delay) delay=$2; shift 2 ;;
    --short) short=$2; shift 2 ;;
    --long) long=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
((long > short && short >= 1)) || { echo "--long must exceed --short >= 1" >&2; exit 2; }
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
make_nodes "xb$$"

cat > "$work/recipe.yaml" <<YAML
name: two-nodes
model:
  hidden_size: 256
  num_layers: 4
  num_heads: 4
  num_kv_heads: 2
data:
  seq_len: 64
train:
  global_batch_size: 8
  log_every: 100
  threads: 1
optim:
  lr: 1.0e-3
  warmup_steps: 2
YAML

# throttle on|off: both ends of the link, so that each direction gets the rate.
link_note="full speed"
throttle() {
  local i
  for i in 0 1; do
    in_node "$i" tc qdisc del dev "${node_if[i]}" root 2> /dev/null || true
    [[ $1 == on ]] || continue
    if in_node "$i" tc qdisc add dev "${node_if[i]}" root netem rate "$rate" delay "$delay" 2> /dev/null; then
      link_note="netem rate $rate delay $delay"
    else
      # No netem in this kernel: a token bucket gives the rate, not the delay.
      in_node "$i" tc qdisc add dev "${node_if[i]}" root tbf rate "$rate" burst 128kb latency 100ms
      link_note="tbf rate $rate (this kernel has no netem: no added delay)"
    fi
  done
}

# median_step_s RUN: the median step time of steps 2.. (step 1 warms up).
median_step_s() {
  "$python" - "$work/$1/metrics.jsonl" <<'PY'
import json, statistics, sys
times = [r["step_s"] for r in map(json.loads, open(sys.argv[1])) if "step_s" in r and r.get("step", 0) >= 2]
print(f"{statistics.median(times):.3f}")
PY
}

layouts=(
  "fsdp4|FSDP 4|--set train.micro_batch_size=2"
  "hsdp2x2|HSDP 2x2|--set parallel.dp=2 --set parallel.fsdp=2 --set train.micro_batch_size=2"
  "tp2_fsdp2|TP 2 x FSDP 2|--set parallel.tp=2 --set parallel.fsdp=2 --set train.micro_batch_size=4"
)
declare -A per_step step_s
port=29500
for speed in full throttled; do
  throttle "$([[ $speed == throttled ]] && echo on || echo off)"
  for entry in "${layouts[@]}"; do
    IFS='|' read -r name _ flags <<< "$entry"
    crossed=()
    for steps in "$short" "$long"; do
      run=$name-$speed-$steps
      before=$(link_bytes)
      # shellcheck disable=SC2086  # flags: recipe overrides, split on purpose
      run_two_nodes "$run" launch "$port" --set train.steps="$steps" $flags
      crossed+=($(( $(link_bytes) - before )))
      port=$((port + 10))
    done
    per_step[$name-$speed]=$(( (crossed[1] - crossed[0]) / (long - short) ))
    step_s[$name-$speed]=$(median_step_s "$name-$speed-$long")
  done
done
throttle off

# The expected bytes, from the trained model's tensors (their names say which unit holds them).
"$xtrain" export "$work/fsdp4-full-$long/checkpoints/latest" "$work/export" > /dev/null
read -r expected_fsdp4 expected_hsdp expected_tp <<< "$("$python" - "$work/export/model.safetensors" <<'PY'
import re, sys
from safetensors import safe_open
with safe_open(sys.argv[1], "pt") as f:
    sizes = {name: f.get_slice(name).get_shape() for name in f.keys()}
def nbytes(shape):
    n = 4  # fp32
    for d in shape: n *= d
    return n
blocks, norms_in_blocks, total, norms = {}, {}, 0, 0
for name, shape in sizes.items():
    b = nbytes(shape)
    total += b
    is_norm = "norm" in name
    norms += b if is_norm else 0
    layer = re.search(r"layers\.(\d+)\.", name)
    if layer:
        blocks[int(layer[1])] = blocks.get(int(layer[1]), 0) + b
        norms_in_blocks[int(layer[1])] = norms_in_blocks.get(int(layer[1]), 0) + (b if is_norm else 0)
last = max(blocks)
G = total + sum(b for l, b in blocks.items() if l != last)
R = total
G_tp = G + norms + sum(n for l, n in norms_in_blocks.items() if l != last)
R_tp = R + norms
print(int(2.5 * G + 3 * R), 2 * R, G_tp + 2 * R_tp)
PY
)"
declare -A expected=([fsdp4]=$expected_fsdp4 [hsdp2x2]=$expected_hsdp [tp2_fsdp2]=$expected_tp)

echo "two nodes x 2 ranks over a veth link; $(nproc) cores; throttled: $link_note; per step: steps $short..$long"
printf '%-14s | %-13s | %-13s | %-8s | %-15s | %s\n' layout "measured MB" "expected MB" ratio "step full (s)" "step throttled (s)"
for entry in "${layouts[@]}"; do
  IFS='|' read -r name layout _ <<< "$entry"
  measured=${per_step[$name-full]}
  awk -v l="$layout" -v m="$measured" -v e="${expected[$name]}" -v f="${step_s[$name-full]}" \
    -v t="${step_s[$name-throttled]}" \
    'BEGIN { printf "%-14s | %-13.2f | %-13.2f | %-8.3f | %-15s | %s\n", l, m / 1e6, e / 1e6, m / e, f, t }'
done
echo "bytes across the link per step, throttled: FSDP 4 ${per_step[fsdp4-throttled]}, HSDP 2x2 ${per_step[hsdp2x2-throttled]}, TP 2 x FSDP 2 ${per_step[tp2_fsdp2-throttled]}"
((per_step[hsdp2x2-full] < per_step[fsdp4-full])) || fail "HSDP 2x2 sent no fewer bytes across the link than FSDP 4"
