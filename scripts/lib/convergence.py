"""What the convergence benches (scripts/bench/fp8.sh, scripts/bench/onebit-adam-demo.sh) read
from a run's metrics.jsonl, and how they compare runs seed by seed: one short run of a small
model ends a few percent away from another that differs only in rounding, so a comparison is
the mean of each seed's difference, with its standard error."""
import json
import statistics


def final_losses(run):
    """(training loss, the mean of the last 20 steps; held-out loss at the last evaluation;
    median seconds a step; steps) of the run folder `run`."""
    records = [json.loads(line) for line in open(f"{run}/metrics.jsonl")]
    train = [r for r in records if "loss" in r and "eval_loss" not in r]
    evals = [r["eval_loss"] for r in records if "eval_loss" in r]
    return (statistics.mean(r["loss"] for r in train[-20:]), evals[-1],
            statistics.median(r["step_s"] for r in train), len(train))


def paired_difference(values, baselines):
    """The mean over seeds of each value's relative difference from the baseline of the same seed,
    and its standard error (None for one seed)."""
    diffs = [value / baseline - 1 for value, baseline in zip(values, baselines)]
    error = statistics.stdev(diffs) / len(diffs) ** 0.5 if len(diffs) > 1 else None
    return statistics.mean(diffs), error
