#!/usr/bin/env bash
# `xtrain plan` against runs on this machine: for each configuration (a dense llama and a
# qwen3_moe, tests/data/plan/here-*.yaml, under FSDP, HSDP, TP + SP, PP, CP and EP with Domino,
# recompute and the chunked loss on and off) trains a few steps as 2 or 4 ranks under
# `xtrain launch` and compares the fullest rank's peak resident memory and the median step time
# (after 2 warm-up steps) with the plan of the same recipe and overrides.
#
# The profile each plan uses is measured in the same invocation (these machines are shared and
# their speed moves by 2x within minutes): a core's fp32 matmul rate, `xtrain health` on as many
# ranks as cores (2048^3, one thread a rank, every rank at once) just before and just after each
# run, the mean of the two, which R ranks share (4 ranks on 2 cores: half a core each); for each
# rank count R, once, the all-gather bus bandwidth over Gloo and the latency of a small all-reduce
# between segments of compute (each the median of three `xtrain health` launches on R ranks) and
# the process baseline: the peak resident memory of the fullest rank of the same launch training a
# model of 58K parameters (hidden 64, one block) for 3 steps, which holds the executable,
# LibTorch, the communicator, the data and the autograd machinery and almost no tensors. Each
# run's profile is written to OUT/NAME.yaml (based on this CPU kind's profile, below, whose
# efficiencies and allocator overhead stay) and given to `xtrain plan --hardware FILE`.
#
# Memory is compared as peak minus baseline against the plan's total minus its runtime term
# (which is that baseline); time as the median step against the plan's step.
#   scripts/plan-here.sh [--quick] [--gate both|memory] [--only NAME[,NAME...]] [--steps N] [--out DIR] [--xtrain PATH]
#   scripts/plan-here.sh --replan DIR     plans DIR's runs again with this planner and their own
#                                         profiles (after a change to the planner), runs nothing
#   scripts/plan-here.sh --fit DIR        fits this CPU's allocator overhead and GEMM and expert
#                                         efficiencies on DIR's two calibration rows
#                                         (scripts/lib/plan_here_fit.py), runs nothing
#
# The figures the runs do not measure come from the profile of this kind of CPU:
# data/hardware/cpu-here-intel.yaml on an Intel CPU, data/hardware/cpu-here.yaml (fitted on an AMD
# EPYC) otherwise, or --base PROFILE.
# --quick runs 4 configurations (the ctest's); exit 1 when a configuration misses 10% memory or
# 20% time. --gate memory holds memory only (the ctest: a step time is no test's business on a
# shared machine); it skips the rate measurements around each run, so its plans take cpu-here's
# rates and the time column is only shown.
set -euo pipefail
cd "$(dirname "$0")/.."
xtrain=$PWD/build/xtrain
python=${XTRAIN_PYTHON:-$PWD/.venv/bin/python3}
[[ -x $python ]] || python=python3
steps=8
out=""
only=""
quick=0
replan=""
fit=""
base=""
gate=both
while (($#)); do
  case $1 in
    --quick) quick=1; shift ;;
    --gate) gate=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --xtrain) xtrain=$2; shift 2 ;;
    --replan) replan=$2; shift 2 ;;
    --fit) fit=$2; shift 2 ;;
    --base) base=$2; shift 2 ;;
    *) echo "scripts/plan-here.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $gate == both || $gate == memory ]] || { echo "scripts/plan-here.sh: --gate is both or memory, got $gate" >&2; exit 2; }
# The calibrated profile of this kind of CPU: the runtime's heap and MKL's kernels differ between
# vendors (docs/plan.md, "Plan against runs here").
if [[ -z $base ]]; then
  base=cpu-here
  if grep -q -m1 '^vendor_id.*GenuineIntel' /proc/cpuinfo && [[ -f data/hardware/cpu-here-intel.yaml ]]; then
    base=cpu-here-intel
  fi
fi
[[ $base == *.yaml ]] || base=$PWD/data/hardware/$base.yaml  # a path: any xtrain binary finds it
echo "scripts/plan-here.sh: the figures no run measures come from $base" >&2
if [[ -n $fit ]]; then
  exec "$python" scripts/lib/plan_here_fit.py "$fit" "$xtrain" "$steps"
fi
if [[ -z $out && -z $replan ]]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
[[ -n $replan ]] || mkdir -p "$out"
dense=tests/data/plan/here-dense.yaml
cores=$(nproc)
moe=tests/data/plan/here-moe.yaml

# name | recipe | ranks | overrides
configurations="
dense-fsdp2|$dense|2|
dense-fsdp2-recompute|$dense|2|memory.recompute=full
dense-fsdp2-loss-unchunked|$dense|2|memory.chunked_loss=off
dense-fsdp4|$dense|4|
dense-hsdp-2x2|$dense|4|parallel.dp=2 parallel.fsdp=2
dense-tp2-sp|$dense|2|parallel.tp=2 parallel.sequence_parallel=true parallel.fsdp=1
dense-pp2-1f1b|$dense|2|parallel.pp=2 parallel.fsdp=1
dense-pp2-interleaved|$dense|2|parallel.pp=2 parallel.fsdp=1 parallel.pp_schedule=interleaved_1f1b parallel.pp_virtual_stages=2
dense-cp2|$dense|2|parallel.cp=2 parallel.fsdp=1
moe-fsdp2|$moe|2|
moe-ep2-domino|$moe|2|parallel.ep=2 parallel.intra_layer_micro_batch=2
moe-ep2-domino-recompute-unchunked|$moe|2|parallel.ep=2 parallel.intra_layer_micro_batch=2 memory.recompute=full memory.chunked_loss=off
"
quick_set="dense-fsdp2 dense-fsdp2-recompute dense-hsdp-2x2 moe-ep2-domino-recompute-unchunked"

selected() {
  local name=$1
  if [[ -n $only ]]; then [[ ",$only," == *",$name,"* ]]; return; fi
  ((quick == 0)) || [[ " $quick_set " == *" $name "* ]]
}

port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# launch RANKS LOG ARGS...: xtrain launch, the output to LOG, shown on failure.
launch() {
  local ranks=$1 log=$2
  shift 2
  "$xtrain" launch --nproc-per-node "$ranks" --master-port "$(port)" -- "$@" > "$log" 2>&1 || {
    cat "$log" >&2
    echo "scripts/plan-here.sh: failed: xtrain launch --nproc-per-node $ranks -- $*" >&2
    exit 1
  }
}

# measure_rank_count RANKS: the all-gather bandwidth over RANKS ranks and the collective latency
# beside compute (the median of three `xtrain health` launches, one launch's figure moves by 2x on
# shared cores; one under --gate memory, whose time column is only shown) and the process
# baseline (a tiny model's run on RANKS ranks), into OUT/ranks-RANKS.json.
measure_rank_count() {
  local ranks=$1 tries=3
  [[ $gate == memory ]] && tries=1
  for ((try = 1; try <= tries; ++try)); do
    launch "$ranks" "$out/health-$ranks-$try.log" health "$dense" --on-problem warn
  done
  launch "$ranks" "$out/baseline-$ranks.log" train "$dense" --set run.dir="$out/baseline-$ranks" \
    --set train.steps=3 --set model.hidden_size=64 --set model.num_layers=1 --set model.num_heads=2 \
    --set model.num_kv_heads=1 --set model.intermediate_size=64 --set model.vocab_size=0
  "$python" - "$out" "$ranks" <<'PY'
import glob, json, re, statistics, sys
out, ranks = sys.argv[1], int(sys.argv[2])
logs = [open(log).read() for log in sorted(glob.glob(f"{out}/health-{ranks}-*.log"))]
gathers = sorted(float(re.search(r"world +\d+ +all_gather +[0-9.]+ +([0-9.]+)", log).group(1)) for log in logs)
latencies = sorted(float(re.search(r"beside compute ms\n\[rank 0\]: +world +\d+ +all_reduce +[0-9.]+ +([0-9.]+)",
                                   log).group(1)) for log in logs)
gather, latency = statistics.median(gathers), statistics.median(latencies)
records = [json.loads(l) for l in open(f"{out}/baseline-{ranks}/metrics.jsonl") if '"step_s"' in l]
baseline = max(r.get("peak_rss_mib_max", r["peak_rss_mib"]) for r in records)
json.dump({"all_gather_gbs": gather, "latency_ms": latency, "baseline_mib": baseline},
          open(f"{out}/ranks-{ranks}.json", "w"))
print(f"{ranks} ranks: all_gather {gather:.3f} GB/s bus bandwidth (the median of "
      f"{', '.join(f'{g:.3f}' for g in gathers)}), a small all-reduce beside compute {latency:.3f} ms (of "
      f"{', '.join(f'{l:.3f}' for l in latencies)}), process baseline {baseline:.0f} MiB")
PY
}

# measure_rate LOG: a core's fp32 matmul rate, every core's rank at once (xtrain health: six
# matmuls of 2048^3, about half a second each, the median; shorter ones catch a moment's load).
measure_rate() {
  if [[ $gate == memory ]]; then : > "$1"; return; fi
  launch "$cores" "$1" health "$dense" --matmul-size 2048 --on-problem warn
}

# write_profile NAME RANKS: OUT/NAME.yaml, the profile for NAME's run: the matmul rate measured
# just before and just after it, shared by RANKS ranks on the cores, and RANKS's links and baseline.
write_profile() {
  "$python" - "$out" "$1" "$2" "$cores" "$base" <<'PY'
import json, re, statistics, sys
out, name, ranks, cores, base = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
def core_rate(log):
    rates = [float(m) for m in re.findall(r"^\[rank 0\]: +\d+ +\S+ +([0-9.]+) +agrees", open(log).read(), re.M)]
    return statistics.median(rates) if rates else None
before, after = core_rate(f"{out}/{name}.rate-before"), core_rate(f"{out}/{name}.rate-after")
links = json.load(open(f"{out}/ranks-{ranks}.json"))
if before is None or after is None:  # --gate memory: cpu-here's rates
    before = after = rank = 0.0
else:
    rank = (before + after) / 2 * min(1, cores / ranks)
with open(f"{out}/{name}.yaml", "w") as f:
    f.write(f"""# Measured by scripts/plan-here.sh around the run it is checked against.
based_on: {base}
name: cpu-here-{name}
description: this machine, {ranks} ranks on its {cores} cores, as measured around the run
sources:
  - "xtrain health on {cores} ranks: fp32 matmul 2048^3 {before:.1f} GFLOP/s a core before the run, {after:.1f} after; {ranks} ranks on {cores} cores: {rank:.1f} a rank (0: not measured, cpu-here's)"
  - "xtrain health on {ranks} ranks: all_gather {links['all_gather_gbs']:.3f} GB/s bus bandwidth; a 4 KiB all_reduce between segments of compute adds {links['latency_ms']:.3f} ms"
  - "runtime: peak resident memory of the fullest rank training a 58K-parameter model, {links['baseline_mib']:.0f} MiB"
{f"peak_tflops_fp32: {rank / 1000:.6f}" if rank else ""}
intra_node_gbs: {links['all_gather_gbs']:.4f}
collective_latency_ms: {links['latency_ms']:.4f}
runtime_gib: {links['baseline_mib'] / 1024:.4f}
""")
PY
}

# routing_args NAME: --expert-load-ratio R for a mixture's plan, R the mean over the timed steps
# and the MoE layers of NAME's moe.load_ratio (the busiest expert's tokens over the mean): how
# the router spreads this recipe's tokens is the workload's, as the matmul rate is the machine's,
# and every layout of the recipe routes the same tokens alike (the parity tests hold each to one
# process's losses); what the planner makes of it is what the table judges.
routing_args() {
  "$python" - "$out/$1/metrics.jsonl" <<'PY'
import json, statistics, sys
records = [json.loads(l) for l in open(sys.argv[1]) if '"step_s"' in l][2:]
ratios = [r for record in records for r in record.get("moe.load_ratio", [])]
if ratios: print(f"--expert-load-ratio {statistics.mean(ratios):.4f}")
PY
}

# replan: each run of a finished table planned again (its overrides from runs.txt).
replan_runs() {
  local name ranks sets recipe
  while IFS='|' read -r name ranks sets; do
    recipe=$dense
    [[ $name == moe-* ]] && recipe=$moe
    sed -i "s#^based_on: .*#based_on: $base#" "$out/$name.yaml"
    set_args=(--set train.steps="$steps")
    for s in $sets; do set_args+=(--set "$s"); done
    # shellcheck disable=SC2046
    "$xtrain" plan "$recipe" "${set_args[@]}" --nodes 1 --gpus-per-node "$ranks" $(routing_args "$name") \
      --hardware "$out/$name.yaml" > "$out/$name.plan" 2>&1 || { cat "$out/$name.plan" >&2; exit 1; }
  done < "$out/runs.txt"
}

if [[ -n $replan ]]; then
  out=$replan
  replan_runs
else
rank_counts=$(echo "$configurations" | while IFS='|' read -r name recipe ranks sets; do
  if [[ -n $name ]] && selected "$name"; then echo "$ranks"; fi; done | sort -u)
for ranks in $rank_counts; do measure_rank_count "$ranks"; done

: > "$out/runs.txt"
echo "$configurations" | while IFS='|' read -r name recipe ranks sets; do
  if [[ -z $name ]] || ! selected "$name"; then continue; fi
  set_args=(--set train.steps="$steps")
  for s in $sets; do set_args+=(--set "$s"); done
  measure_rate "$out/$name.rate-before"
  launch "$ranks" "$out/$name.log" train "$recipe" --set run.dir="$out/$name" "${set_args[@]}"
  measure_rate "$out/$name.rate-after"
  write_profile "$name" "$ranks"
  # shellcheck disable=SC2046
  "$xtrain" plan "$recipe" "${set_args[@]}" --nodes 1 --gpus-per-node "$ranks" $(routing_args "$name") \
    --hardware "$out/$name.yaml" > "$out/$name.plan" 2>&1 || { cat "$out/$name.plan" >&2; exit 1; }
  echo "$name|$ranks|$sets" >> "$out/runs.txt"
  echo "ran $name" >&2
done
fi

"$python" - "$out" "$gate" <<'PY'
import json, re, statistics, sys
out, gate = sys.argv[1], sys.argv[2]
memory_bound, time_bound = 0.10, 0.20
rows, misses = [], []
def term(plan, name):  # MiB of a memory term, 0 when the plan has none
    found = re.search(rf"^  {name} +([0-9.]+)", plan, re.M)
    return float(found.group(1)) * 1024 if found else 0.0
for line in open(f"{out}/runs.txt"):
    name, ranks, sets = line.rstrip("\n").split("|")
    plan = open(f"{out}/{name}.plan").read()
    total, runtime = term(plan, "total"), term(plan, "runtime")
    planned_tensors = total - runtime - term(plan, "allocator")
    planned_s = float(re.search(r"^  step +([0-9.]+)", plan, re.M).group(1))
    records = [json.loads(l) for l in open(f"{out}/{name}/metrics.jsonl") if '"step_s"' in l]
    peak = max(r.get("peak_rss_mib_max", r["peak_rss_mib"]) for r in records)
    if "pp.peak_rss_mib_by_stage" in records[-1]:
        peak = max(peak, max(max(r["pp.peak_rss_mib_by_stage"]) for r in records))
    tensors = max(r.get("peak_device_mib_max", r["peak_device_mib"]) for r in records)
    measured_s = statistics.median(r["step_s"] for r in records[2:])
    memory_error = (total - runtime) / (peak - runtime) - 1
    tensor_error = planned_tensors / tensors - 1 if tensors > 0 else float("nan")
    time_error = planned_s / measured_s - 1
    missed = abs(memory_error) > memory_bound or (gate == "both" and abs(time_error) > time_bound)
    if missed: misses.append(name)
    rows.append((name, ranks, total - runtime, peak - runtime, memory_error, planned_tensors, tensors, tensor_error,
                 planned_s, measured_s, time_error, missed))
print("| configuration | ranks | memory planned MiB | measured MiB | error | tensors planned MiB | counted MiB | error "
      "| step planned s | measured s | error | |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for name, ranks, pm, mm, me, pt, mt, te_, ps, ms, te, missed in rows:
    counted = f"{mt:.0f} | {100 * te_:+.1f}%" if mt > 0 else "- | -"
    print(f"| {name} | {ranks} | {pm:.0f} | {mm:.0f} | {100 * me:+.1f}% | {pt:.0f} | {counted} | "
          f"{ps:.3f} | {ms:.3f} | {100 * te:+.1f}% | {'MISSES' if missed else ''} |")
held = "10% memory and 20% time" if gate == "both" else "10% memory (time shown, planned at cpu-here's rates)"
print(f"memory: peak resident memory of the fullest rank less the process baseline; tensors: the plan's terms but "
      f"the allocator's and the runtime's against the fullest rank's peak of live tensor storage (peak_device_mib_max); "
      f"time: the median step after 2 warm-up steps. {len(rows) - len(misses)} of {len(rows)} within {held}.")
sys.exit(1 if misses else 0)
PY
