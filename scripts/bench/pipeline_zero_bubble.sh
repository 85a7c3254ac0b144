#!/usr/bin/env bash
# The pipeline bubble of each schedule on 4 stages x 8 micro batches, on this machine: a 15-layer
# model of hidden 512 whose head (a vocabulary of 6144, its loss unchunked so that its backward
# runs in the backward) weighs about a layer, cut by parallel.pp_layers [4, 4, 4, 3] (2 a chunk,
# the last 1, for the schedules of two chunks a rank) so that every stage carries four layers'
# work, the embedding's lookup on the first beside its four; micro batches of one 128-token
# sequence, 8 steps per schedule, steps 3-8 averaged. Per stage:
#   measured: its time blocked on its neighbours' activations and gradients (pp.idle_s_by_stage)
#             as a fraction of the step;
#   replayed: the schedule's order (xtrain validate --print-schedule) run on each stage's own
#             pass times with free transfers, the step's length less the stage's work as a
#             fraction of the step: the bubble the order leaves where every stage has a core of
#             its own. On the wall-clock pass times (pp.forward_s_by_stage, backward,
#             weight_grad), and on their CPU time (pp.forward_cpu_s_by_stage, ...), which leaves
#             out the time a rank waited for one of this machine's cores;
#   theory:   with F = B = W (1f1b's backward B + W), (p-1)/(m+p-1) for 1f1b, (p-1)/(vm+p-1)
#             interleaved, (p-1)(F+B-W)/(m(F+B+W)+(p-1)(F+B-W)) for ZB-H1, 0 for ZBV (its
#             (p-1)(F+B-2W) on half-size chunks), and DualPipeV's (p-1)(F&B+B-3W) on half-size
#             chunks with the overlapped pair F&B = F+B+W (one stream runs it in turn):
#             (p-1)/(6m+p-1);
# and the most micro batches each stage holds at once (pp.in_flight_by_stage: forward done, its
# weight gradients not yet; chunk-micro-batches for the V schedules) with its peak tensor memory
# (pp.peak_tensor_mib_by_stage). dualpipev's overlapped pairs, "(0F7;7B3)OVERLAP_F_B" in the
# order, replay as their forward then their backward; its whole backwards (B) take a stage's I
# and W pass times together.
#   scripts/bench/pipeline_zero_bubble.sh        (XTRAIN=path/to/xtrain, default build/xtrain)
set -euo pipefail
cd "$(dirname "$0")/../.."
xtrain=${XTRAIN:-$PWD/build/xtrain}
python=${XTRAIN_PYTHON:-.venv/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

cat > "$work/recipe.yaml" <<YAML
name: bench-zero-bubble
model: {hidden_size: 512, num_layers: 15, num_heads: 8, vocab_size: 6144}
memory: {chunked_loss: "off"}
data: {seq_len: 128}
train: {steps: 8, global_batch_size: 8, micro_batch_size: 1, log_every: 1, threads: 1, eval_every: 0}
optim: {warmup_steps: 1}
checkpoint: {every: 0}
parallel: {pp: 4, fsdp: 1}
YAML
run() {  # NAME [--set ...]
  local name=$1
  shift
  "$xtrain" launch --nproc-per-node 4 --master-port "$(port)" -- train "$work/recipe.yaml" \
    --set run.dir="$work/$name" "$@" > "$work/$name.log" 2>&1 || { cat "$work/$name.log" >&2; exit 1; }
}
one=(--set parallel.pp_layers=[4,4,4,3])
two=(--set parallel.pp_virtual_stages=2 --set parallel.pp_layers=[2,2,2,2,2,2,2,1])
run 1f1b --set parallel.pp_schedule=1f1b "${one[@]}"
run interleaved_1f1b --set parallel.pp_schedule=interleaved_1f1b "${two[@]}"
run zb_h1 --set parallel.pp_schedule=zb_h1 "${one[@]}"
run zbv --set parallel.pp_schedule=zbv "${two[@]}"
run dualpipev --set parallel.pp_schedule=dualpipev "${two[@]}"

for name in 1f1b zb_h1; do
  "$xtrain" validate "$work/recipe.yaml" --set parallel.pp_schedule=$name "${one[@]}" --print-schedule 8 \
    > "$work/$name.order"
done
for name in interleaved_1f1b zbv dualpipev; do
  "$xtrain" validate "$work/recipe.yaml" --set parallel.pp_schedule=$name "${two[@]}" --print-schedule 8 \
    > "$work/$name.order"
done

"$python" - "$work" <<'PY'
import json, re, sys
work, p, m = sys.argv[1], 4, 8
theory = {"1f1b": (p - 1) / (m + p - 1), "interleaved_1f1b": (p - 1) / (2 * m + p - 1),
          "zb_h1": (p - 1) * 1 / (m * 3 + (p - 1) * 1), "zbv": 0.0, "dualpipev": (p - 1) / (6 * m + p - 1)}


def replay(name, seconds):
    """Each stage's bubble when its order runs on its own pass times, transfers free."""
    orders = [re.sub(r"\((\S+);(\S+)\)OVERLAP_F_B", r"\1 \2", line.split(":")[1]).split()
              for line in open(f"{work}/{name}.order")]
    done, free, position, busy = {}, [0.0] * p, [0] * p, [0.0] * p
    chunks = 1 + max(int(re.match(r"\d+", a).group()) for order in orders for a in order)
    while any(position[r] < len(orders[r]) for r in range(p)):
        moved = False
        for r in range(p):
            if position[r] == len(orders[r]):
                continue
            action = orders[r][position[r]]
            kind = next(k for k in "FBIW" if k in action)
            chunk, micro = (int(x) for x in action.split(kind))
            need = {"F": (chunk - 1, "F", micro) if chunk > 0 else None,
                    "W": (chunk, "I", micro)}.get(kind, (chunk + 1, "BI", micro) if chunk < chunks - 1 else None)
            if need is not None:
                keys = [(need[0], k, need[2]) for k in need[1]]
                ready = [done[k] for k in keys if k in done]
                if not ready:
                    continue
                start = max(free[r], ready[0])
            else:
                start = free[r]
            took = seconds[r][kind]
            free[r] = done[(chunk, kind, micro)] = start + took
            busy[r] += took
            position[r] += 1
            moved = True
        assert moved, f"{name}: the order deadlocks"
    step = max(free)
    return [(step - b) / step for b in busy]


print("| schedule | measured idle / step, by stage | mean | replayed on wall-clock passes, mean "
      "| replayed on CPU-time passes, by stage | mean | theory | step s | micro batches held, by stage "
      "| peak tensor MiB, by stage |")
print("|---|---|---|---|---|---|---|---|---|---|")
passes = {}
for name in theory:
    rows = [json.loads(l) for l in open(f"{work}/{name}/metrics.jsonl") if '"loss"' in l][2:]
    mean = lambda key, s: sum(r[key][s] for r in rows) / len(rows)
    step = sum(r["step_s"] for r in rows) / len(rows)
    fraction = [sum(r["pp.idle_s_by_stage"][s] / r["step_s"] for r in rows) / len(rows) for s in range(p)]
    v = 2 if name.startswith("interleaved") or name in ("zbv", "dualpipev") else 1

    def per_pass(clock):
        return [{"F": mean(f"pp.forward{clock}_s_by_stage", s) / (m * v),
                 "B": (mean(f"pp.backward{clock}_s_by_stage", s) + mean(f"pp.weight_grad{clock}_s_by_stage", s)) / (m * v),
                 "I": mean(f"pp.backward{clock}_s_by_stage", s) / (m * v),
                 "W": mean(f"pp.weight_grad{clock}_s_by_stage", s) / (m * v)} for s in range(p)]
    wall, cpu = replay(name, per_pass("")), replay(name, per_pass("_cpu"))
    held = " / ".join(str(int(x)) for x in rows[-1]["pp.in_flight_by_stage"])
    tensors = " / ".join(f"{x:.1f}" for x in rows[-1]["pp.peak_tensor_mib_by_stage"])
    join = lambda xs, f: " / ".join(f.format(x) for x in xs)
    print(f"| {name} | {join(fraction, '{:.2f}')} | {sum(fraction) / p:.2f} | {sum(wall) / p:.2f} "
          f"| {join(cpu, '{:.2f}')} | {sum(cpu) / p:.2f} | {theory[name]:.2f} | {step:.3f} | {held} | {tensors} |")
    passes[name] = "; ".join(f"{x['F']*1e3:.1f} / {x['I']*1e3:.1f} / {x['W']*1e3:.1f}" for x in per_pass("_cpu"))
print()
for name, line in passes.items():
    print(f"{name}: CPU ms per pass, F / B or I / W by stage: {line}")
PY
