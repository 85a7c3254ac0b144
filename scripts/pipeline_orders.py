#!/usr/bin/env python3
"""Pipeline action orders: xtrain's (`xtrain validate --print-schedule`) beside PyTorch's
(torch.distributed.pipelining) for the same stages and micro batches.

zb_h1 is PyTorch's ScheduleInterleavedZeroBubble (the ZB1P schedule of Qi et al.) with one chunk
per rank, zbv is its ScheduleZBVZeroBubble (two chunks a rank in a V) and dualpipev its
ScheduleDualPipeV (the same V, forwards paired with backwards as OVERLAP_F_B): the same order on
every rank, once PyTorch's empty time slots are left out (xtrain's ranks wait on their receives
instead). PyTorch's grids (time steps x ranks, with those slots) are printed too, for the timing
they assume (every F, I and W one slot).

  scripts/pipeline_orders.py [--xtrain build/xtrain] [--stages 4] [--micro-batches 8]
  scripts/pipeline_orders.py --write   # tests/data/pipeline/{zb_h1,zbv,dualpipev}_pytorch_4x8.txt,
                                       # which the unit test [pipeline_layout] compares xtrain's
                                       # orders with
Exit 1 where the orders differ.
"""
import argparse
import os
import subprocess
import sys
import tempfile

from torch.distributed.pipelining import schedules

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pytorch_zero_bubble(stages, micro_batches):
    """ScheduleInterleavedZeroBubble's pipeline_order for one chunk per rank, computed as its
    __init__ does, without the stage modules and process group it would otherwise need."""
    schedule = schedules.ScheduleInterleavedZeroBubble.__new__(schedules.ScheduleInterleavedZeroBubble)
    schedule.pp_group_size = stages
    schedule.n_local_stages = 1
    schedule._n_microbatches = micro_batches
    schedule.number_of_rounds = max(1, micro_batches // stages)
    schedule.microbatches_per_round = micro_batches // schedule.number_of_rounds
    schedule.pipeline_order = {rank: schedule._calculate_single_rank_operations(rank) for rank in range(stages)}
    return schedule._add_bubbles_to_actions(stages)


def pytorch_zbv(stages, micro_batches):
    """ScheduleZBVZeroBubble's pipeline_order (chunks r and 2 stages - 1 - r on rank r), computed
    as its __init__ does, without the stage modules and process group."""
    schedule = schedules.ScheduleZBVZeroBubble.__new__(schedules.ScheduleZBVZeroBubble)
    schedule.pp_group_size = stages
    schedule.num_stages = 2 * stages
    schedule._n_microbatches = micro_batches
    return {rank: schedule._calculate_single_rank_operations(rank) for rank in range(stages)}


def pytorch_dualpipev(stages, micro_batches):
    """ScheduleDualPipeV's pipeline_order (the V of zbv; its overlapped forward-backward pairs
    print as "(0F7;7B0)OVERLAP_F_B"), computed as its __init__ does, without the stage modules and
    process group."""
    schedule = schedules.ScheduleDualPipeV.__new__(schedules.ScheduleDualPipeV)
    schedule.pp_group_size = stages
    schedule._n_microbatches = micro_batches
    return {rank: schedule._calculate_single_rank_operations(rank) for rank in range(stages)}


REFERENCES = {"zb_h1": ("ScheduleInterleavedZeroBubble, 1 chunk per rank", pytorch_zero_bubble),
              "zbv": ("ScheduleZBVZeroBubble, 2 chunks per rank", pytorch_zbv),
              "dualpipev": ("ScheduleDualPipeV, 2 chunks per rank", pytorch_dualpipev)}
V_SHAPED = ("zbv", "dualpipev")


def as_lines(order):
    return "".join(f"rank {rank}: " + " ".join(str(a) for a in order[rank] if a is not None) + "\n"
                   for rank in sorted(order))


def xtrain_order(binary, schedule, stages, micro_batches):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as recipe:
        recipe.write(f"name: orders\nmodel: {{num_layers: {2 * stages}}}\n"
                     f"train: {{global_batch_size: {micro_batches}, micro_batch_size: 1}}\n"
                     f"parallel: {{pp: {stages}, fsdp: 1, pp_schedule: {schedule}, "
                     f"pp_virtual_stages: {2 if schedule in V_SHAPED else 1}}}\n")
    try:
        return subprocess.run([binary, "validate", recipe.name, "--print-schedule", str(micro_batches)],
                              check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(recipe.name)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--xtrain", default=os.path.join(ROOT, "build", "xtrain"))
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--micro-batches", type=int, default=8)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    differ = []
    for name, (title, reference) in REFERENCES.items():
        order = reference(args.stages, args.micro_batches)
        theirs = as_lines(order)
        if args.write:
            path = os.path.join(ROOT, "tests", "data", "pipeline",
                                f"{name}_pytorch_{args.stages}x{args.micro_batches}.txt")
            with open(path, "w") as out:
                out.write(theirs)
            print(f"wrote {path}")
            continue
        print(f"PyTorch {title}, {args.stages} stages x {args.micro_batches} micro batches "
              f"(time steps x ranks):")
        print(schedules._format_pipeline_order(order))
        print("\nPyTorch, empty slots left out:")
        print(theirs, end="")
        ours = xtrain_order(args.xtrain, name, args.stages, args.micro_batches)
        print(f"\nxtrain parallel.pp_schedule {name}:")
        print(ours, end="")
        same = ours == theirs
        print(f"\n{name} {'is' if same else 'is NOT'} PyTorch's order on every rank\n")
        if not same:
            differ.append(name)
    if not args.write:
        print("xtrain parallel.pp_schedule 1f1b (zb_h1 without the Ws, I as B):")
        print(xtrain_order(args.xtrain, "1f1b", args.stages, args.micro_batches), end="")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
