"""The report of scripts/bench/onebit-adam-demo.sh: 1-bit Adam against AdamW seed by seed at each
peak learning rate, and, with more than one rate, each optimizer at its own best rate (the lowest
mean held-out loss over the seeds). Exits 1 unless the comparison that decides (the only rate, or
best against best) is within 2% on both the training and the held-out loss.
    onebit_adam_report.py WORK "SEEDS" "LRS"   (LRS empty: the recipe's rate, WORK/seed-S/OPT)"""
import statistics
import sys

from convergence import final_losses, paired_difference

OPTIMIZERS = ("adamw", "onebit_adam")


def run_dir(work, seed, lr, optimizer):
    return f"{work}/seed-{seed}" + (f"/lr-{lr}" if lr else "") + f"/{optimizer}"


def compare(onebit, adamw):
    """'train ±x%, held-out ±y%' of 1-bit Adam's runs against AdamW's, seed by seed, and the two
    mean differences."""
    (train, train_error), (held_out, eval_error) = (
        paired_difference([f[column] for f in onebit], [f[column] for f in adamw]) for column in (0, 1))
    errors = f" (standard errors {train_error:.2%}, {eval_error:.2%})" if train_error is not None else ""
    return f"train {train:+.2%}, held-out {held_out:+.2%}{errors}", (train, held_out)


def main(work, seeds, lrs):
    runs = {(lr, name): [final_losses(run_dir(work, seed, lr, name)) for seed in seeds]
            for lr in lrs for name in OPTIMIZERS}
    print("lr       | seed  | optimizer    | train loss (mean of last 20) | held-out loss | against AdamW")
    for lr in lrs:
        for seed, a, b in zip(seeds, runs[lr, "adamw"], runs[lr, "onebit_adam"]):
            label = lr or "recipe"
            print(f"{label:<8} | {seed:<5} | adamw        | {a[0]:.4f}                       | {a[1]:.4f}        |")
            print(f"{label:<8} | {seed:<5} | onebit_adam  | {b[0]:.4f}                       | {b[1]:.4f}        | "
                  f"train {b[0] / a[0] - 1:+.2%}, held-out {b[1] / a[1] - 1:+.2%}")
    for lr in lrs:
        text, deciding = compare(runs[lr, "onebit_adam"], runs[lr, "adamw"])
        print(f"1-bit Adam against AdamW at lr {lr or 'of the recipe'}, mean over {len(seeds)} seed(s): {text}")
    if len(lrs) > 1:
        best = {name: min(lrs, key=lambda lr: statistics.mean(f[1] for f in runs[lr, name])) for name in OPTIMIZERS}
        for name in OPTIMIZERS:
            means = ", ".join(f"{lr}: {statistics.mean(f[1] for f in runs[lr, name]):.4f}" for lr in lrs)
            print(f"{name} mean held-out loss by lr: {means}; best {best[name]}")
        text, deciding = compare(runs[best["onebit_adam"], "onebit_adam"], runs[best["adamw"], "adamw"])
        print(f"each at its best lr (1-bit Adam {best['onebit_adam']}, AdamW {best['adamw']}): {text}")
    ok = all(abs(d) <= 0.02 for d in deciding)
    print("within 2%" if ok else "NOT within 2%")
    return 0 if ok else 1


if __name__ == "__main__":
    work, seeds, lrs = sys.argv[1], sys.argv[2].split(), sys.argv[3].split() or [""]
    sys.exit(main(work, seeds, lrs))
