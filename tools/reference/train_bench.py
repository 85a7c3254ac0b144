#!/usr/bin/python3
"""Times training steps of the PyTorch Llama reference on CPU.

Usage:
    train_bench.py --config config.json --batch B --seq T --steps N
                   [--warmup W --threads K --dtype fp32|bf16 --compile]

Each step is forward + cross-entropy + backward + global-norm clip (1.0) +
AdamW (lr 3e-4, betas 0.9/0.95, weight decay 0.1 on matrices), on one fixed
batch of random tokens. Prints one line of JSON; tokens_per_s is B*T divided
by the median step time, which is robust to scheduler hiccups.
"""

import argparse
import contextlib
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden import param_groups  # noqa: E402
from llama_ref import LlamaRef, load_config  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", required=True, help="HF-style config.json")
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps before timing")
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    p.add_argument("--compile", action="store_true", help="wrap the model in torch.compile")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.steps < 1:
        sys.exit("error: --steps must be at least 1")
    if args.compile and not hasattr(torch, "compile"):
        print(f"error: torch.compile is not available in torch {torch.__version__}",
              file=sys.stderr)
        sys.exit(2)

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = load_config(args.config)
    model = LlamaRef(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(param_groups(model, 0.1), lr=3e-4, betas=(0.9, 0.95))
    tokens = torch.randint(0, cfg.vocab_size, (args.batch, args.seq + 1))

    # Mixed precision: weights and optimizer state stay fp32, matmuls run bf16.
    autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if args.dtype == "bf16"
                else contextlib.nullcontext())
    loss_fn = torch.compile(model.loss) if args.compile else model.loss

    times = []
    for step in range(args.warmup + args.steps):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with autocast:
            _, loss = loss_fn(tokens)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        opt.step()
        elapsed = time.perf_counter() - start
        if step >= args.warmup:
            times.append(elapsed)

    median = statistics.median(times)
    print(json.dumps({
        "tokens_per_s": args.batch * args.seq / median,
        "step_s_median": median,
        "steps": args.steps,
        "threads": args.threads,
        "params": n_params,
        "batch": args.batch,
        "seq": args.seq,
        "dtype": args.dtype,
    }))


if __name__ == "__main__":
    main()
