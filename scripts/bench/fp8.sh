#!/usr/bin/env bash
# FP8 convergence: trains the demo recipe (dense) and moe-demo (FP8 experts) for 480 steps in
# fp32, bf16 and bf16 with each FP8 scaling (tensorwise, rowwise, blockwise; rowwise_with_gw_hp on
# request), and compares the
# final training loss (mean of the last 20 steps) and the held-out loss of each against bf16.
# Goal: every FP8 kind within 2% of bf16.
#
# One 480-step run of a model this small ends a few percent away from another run that differs
# only in the last bits of its arithmetic (two bf16 runs whose GEMMs sum in another order differ
# by 2.2%), so --seeds repeats every precision from several initializations and data orders
# (run.seed) and compares the means; the table shows each mean's spread (the largest minus the
# smallest seed's). A finished run (its metrics.jsonl has the final evaluation) is not run again,
# so an interrupted invocation continues with WORK_DIR=the same folder. Also prints s/step (CPU:
# the FP8 GEMMs dequantize and multiply in fp32, so this checks numerics, not speed).
# --modes picks the precisions (bf16, the baseline, always runs), e.g. to rerun only the FP8 kinds
# after a change to them; KIND-e4m3 or KIND-e5m2 (rowwise-e5m2) sets the output gradients' format
# (precision.fp8_grad) instead of the kind's default.
#   scripts/bench/fp8.sh [--steps N] [--recipes "demo moe-demo"] [--seeds "1234 1 2"]
#                        [--modes "fp32 tensorwise rowwise blockwise"]
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=480
recipes="demo moe-demo"
seeds=1234
modes="fp32 bf16 tensorwise rowwise blockwise"
while (($#)); do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    --recipes) recipes=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
for mode in $modes; do
  case $mode in
    fp32 | bf16 | tensorwise | rowwise | rowwise_with_gw_hp | blockwise) ;;
    tensorwise-e4m3 | tensorwise-e5m2 | rowwise-e4m3 | rowwise-e5m2 | rowwise_with_gw_hp-e4m3 | rowwise_with_gw_hp-e5m2) ;;
    blockwise-e4m3 | blockwise-e5m2) ;;
    *) echo "--modes: unknown precision '$mode' (fp32, bf16, tensorwise, rowwise, rowwise_with_gw_hp or blockwise, the FP8 kinds also as KIND-e4m3 or KIND-e5m2)" >&2; exit 2 ;;
  esac
done
[[ " $modes " == *" bf16 "* ]] || modes="bf16 $modes"
bash scripts/build.sh > /dev/null
python=${XTRAIN_PYTHON:-.venv/bin/python3}
work=${WORK_DIR:-$(mktemp -d)}
finished() {  # RUN_DIR: its metrics.jsonl holds the evaluation at the last step
  [[ -f $1/metrics.jsonl ]] && grep -q "\"step\": *$steps, *\"eval_loss\"" "$1/metrics.jsonl"
}
for recipe in $recipes; do
  for seed in $seeds; do
    mkdir -p "$work/$recipe/seed-$seed"
    for mode in $modes; do
      dir=$work/$recipe/seed-$seed/$mode
      if finished "$dir"; then echo "$recipe seed $seed $mode: done before"; continue; fi
      rm -rf "$dir"
      case $mode in
        fp32) settings=(--set train.dtype=fp32) ;;
        bf16) settings=(--set train.dtype=bf16) ;;
        *-e*) settings=(--set train.dtype=bf16 --set precision.fp8="${mode%-*}" --set precision.fp8_grad="${mode##*-}") ;;
        *) settings=(--set train.dtype=bf16 --set precision.fp8="$mode") ;;
      esac
      # Evaluation at the end only, on the recipe's held-out set.
      build/xtrain train "recipes/$recipe.yaml" --set run.dir="$dir" --set run.seed="$seed" "${settings[@]}" \
        --set train.steps="$steps" --set train.eval_every="$steps" --set checkpoint.every=0 \
        --set checkpoint.resume=never > "$dir.log" 2>&1 || { tail -n 20 "$dir.log"; exit 1; }
      echo "$recipe seed $seed $mode: done"
    done
  done
done
"$python" - "$work" "$recipes" "$modes" "$seeds" <<'PY'
import statistics, sys
sys.path.insert(0, "scripts/lib")
from convergence import final_losses as figures, paired_difference
work, recipes, modes, seeds = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4].split()

worst = 0.0
for recipe in recipes:
    runs = {m: [figures(f"{work}/{recipe}/seed-{s}/{m}") for s in seeds] for m in modes}
    mean = {m: (statistics.mean(f[0] for f in runs[m]), statistics.mean(f[1] for f in runs[m])) for m in modes}
    spread = {m: (max(f[0] for f in runs[m]) - min(f[0] for f in runs[m]),
                  max(f[1] for f in runs[m]) - min(f[1] for f in runs[m])) for m in modes}
    base_train, base_eval = mean["bf16"]

    def paired(mode, column):
        # Each seed's run against bf16's of the same seed: the mean difference and, over several
        # seeds, its standard error (what the mean would move by with other seeds).
        mean, error = paired_difference([f[column] for f in runs[mode]], [f[column] for f in runs["bf16"]])
        return f"{100 * mean:+.2f}%" + (f" ± {100 * error:.2f}" if error is not None else "")

    print(f"\n{recipe}, {runs['bf16'][0][3]} steps, seeds {', '.join(seeds)} (mean over seeds; spread: largest minus "
          "smallest; vs bf16: the mean of each seed's difference from bf16's run of the same seed, ± its standard error)\n")
    print("| precision | final train loss (mean of last 20) | spread | vs bf16 | held-out loss | spread | vs bf16 | s/step |")
    print("|---|---|---|---|---|---|---|---|")
    for mode in modes:
        final, held_out = mean[mode]
        step_s = statistics.median(f[2] for f in runs[mode])
        name = mode if mode in ("fp32", "bf16") else f"bf16 + fp8 {mode}"
        print(f"| {name} | {final:.4f} | {spread[mode][0]:.4f} | {paired(mode, 0)} | "
              f"{held_out:.4f} | {spread[mode][1]:.4f} | {paired(mode, 1)} | {step_s:.3f} |")
        if mode not in ("fp32", "bf16"):
            worst = max(worst, abs(final / base_train - 1), abs(held_out / base_eval - 1))
    if len(seeds) > 1:
        print("\nper seed, train / held-out:")
        for i, seed in enumerate(seeds):
            cells = "  ".join(f"{m} {runs[m][i][0]:.4f}/{runs[m][i][1]:.4f}" for m in modes)
            print(f"  seed {seed}: {cells}")
print(f"\nlargest FP8 difference from bf16 (final or held-out loss, means over seeds): {100 * worst:.2f}% "
      "(goal: within 2%)")
PY
