#!/usr/bin/env python3
"""Fits the three figures of a cpu-here profile that are not measured around each run, on the
two calibration rows of a finished `scripts/plan-here.sh --out DIR` table (dense-fsdp2 and
moe-fsdp2), and prints them as the lines of a profile for this kind of CPU:

  allocator_overhead  least squares of the two rows' relative memory errors (the plan's
                      allocator term is linear in it, so two plans a row give the line);
  gemm_efficiency     the value at which dense-fsdp2's planned step equals its measured step;
  expert_efficiency   the same on moe-fsdp2, with the fitted GEMM efficiency.

Each plan is `xtrain plan` of the row's recipe and overrides against the row's own measured
profile with the candidate figures set over it. The other rows are never read: they are what the
fit is judged on.

  plan_here_fit.py DIR XTRAIN STEPS
"""
import json
import os
import re
import statistics
import subprocess
import sys

CALIBRATION = ("dense-fsdp2", "moe-fsdp2")


def load_runs(out):
    runs = {}
    for line in open(f"{out}/runs.txt"):
        name, ranks, sets = line.rstrip("\n").split("|")
        runs[name] = (int(ranks), sets.split())
    missing = [name for name in CALIBRATION if name not in runs]
    if missing:
        sys.exit(f"plan_here_fit: {out}/runs.txt has no run of {', '.join(missing)}; "
                 f"run scripts/plan-here.sh without --only/--quick first")
    return runs


def measured(out, name):
    records = [json.loads(l) for l in open(f"{out}/{name}/metrics.jsonl") if '"step_s"' in l]
    peak = max(r.get("peak_rss_mib_max", r["peak_rss_mib"]) for r in records)
    return peak, statistics.median(r["step_s"] for r in records[2:])


class Planner:
    def __init__(self, out, xtrain, steps, runs):
        self.out, self.xtrain, self.steps, self.runs = out, xtrain, steps, runs
        os.makedirs(f"{out}/fit", exist_ok=True)

    def plan(self, name, fields):
        """(memory MiB above the runtime term, step s) of NAME's plan with FIELDS over its profile."""
        profile = f"{self.out}/fit/{name}.yaml"
        with open(profile, "w") as f:
            f.write(f"based_on: {os.path.abspath(self.out)}/{name}.yaml\nname: fit-{name}\nsources: [plan_here_fit.py]\n")
            for key, value in fields.items():
                f.write(f"{key}: {value}\n")
        ranks, sets = self.runs[name]
        recipe = "tests/data/plan/here-moe.yaml" if name.startswith("moe-") else "tests/data/plan/here-dense.yaml"
        args = [self.xtrain, "plan", recipe, "--set", f"train.steps={self.steps}"]
        for s in sets:
            args += ["--set", s]
        args += ["--nodes", "1", "--gpus-per-node", str(ranks), "--hardware", profile]
        text = subprocess.run(args, check=True, capture_output=True, text=True).stdout

        def term(key):
            found = re.search(rf"^  {key} +([0-9.]+)", text, re.M)
            return float(found.group(1)) if found else 0.0
        return (term("total") - term("runtime")) * 1024, term("step")


def fit_allocator(planner, rows):
    """Least squares of (planned / measured - 1) over the rows; planned = a + b k for each row."""
    lines = []
    for name, (memory, _) in rows.items():
        # two points of the line (the profile format refuses 0)
        at_half, at1 = (planner.plan(name, {"allocator_overhead": k})[0] for k in (0.5, 1.0))
        slope = 2 * (at1 - at_half)
        lines.append(((at1 - slope) / memory - 1, slope / memory))
    k = -sum(a * b for a, b in lines) / sum(b * b for _, b in lines)
    return round(min(max(k, 0.01), 1.0), 2)


def fit_rate(planner, name, field, measured_s, fixed):
    """The efficiency (two digits) at which NAME's planned step equals measured_s; the step falls as
    the efficiency grows."""
    low, high = 0.05, 1.0  # the profile format holds efficiencies to (0, 1]
    for _ in range(14):
        middle = (low + high) / 2
        step = planner.plan(name, {**fixed, field: middle})[1]
        low, high = (middle, high) if step > measured_s else (low, middle)
    return round((low + high) / 2, 2)


def main():
    out, xtrain, steps = sys.argv[1], sys.argv[2], sys.argv[3]
    runs = load_runs(out)
    planner = Planner(out, xtrain, steps, runs)
    rows = {name: measured(out, name) for name in CALIBRATION}
    baseline = {name: planner.plan(name, {})[0] for name in CALIBRATION}  # runtime removed below
    for name in CALIBRATION:
        runtime_mib = float(re.search(r"runtime_gib: ([0-9.]+)", open(f"{out}/{name}.yaml").read()).group(1)) * 1024
        rows[name] = (rows[name][0] - runtime_mib, rows[name][1])
    allocator = fit_allocator(planner, rows)
    fixed = {"allocator_overhead": allocator}
    gemm = fit_rate(planner, "dense-fsdp2", "gemm_efficiency", rows["dense-fsdp2"][1], fixed)
    fixed["gemm_efficiency"] = gemm
    expert = fit_rate(planner, "moe-fsdp2", "expert_efficiency", rows["moe-fsdp2"][1], fixed)
    fixed["expert_efficiency"] = expert
    print(f"# fitted on {out}'s dense-fsdp2 and moe-fsdp2 (memory MiB above the baseline, median step s):")
    for name in CALIBRATION:
        memory, step = planner.plan(name, fixed)
        print(f"#   {name}: memory {memory:.0f} planned, {rows[name][0]:.0f} measured ({100 * (memory / rows[name][0] - 1):+.1f}%, "
              f"{baseline[name]:.0f} with the base profile's figures); step {step:.3f} s planned, {rows[name][1]:.3f} measured")
    print(f"allocator_overhead: {allocator}\ngemm_efficiency: {gemm}\nexpert_efficiency: {expert}")


if __name__ == "__main__":
    main()
