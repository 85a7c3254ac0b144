#!/usr/bin/env python3
"""Times training steps of Hugging Face LlamaForCausalLM on CPU, eager or torch.compile.

Usage:
    train_bench.py --config config.json --batch B --seq T --steps N
                   [--warmup W --threads K --dtype fp32|bf16 --compile
                    --attn sdpa|eager --matmul-size M]

The model is `transformers.LlamaForCausalLM` built (randomly initialised, seed 0)
from an HF config.json such as the one xtrain writes into its checkpoints. Each
step is forward + cross-entropy + backward + global-norm clip (1.0) + AdamW
(lr 3e-4, betas 0.9/0.95, weight decay 0.1 on matrices), on one fixed batch of
random tokens. With --dtype bf16 the weights and optimizer state stay fp32 and
the forward runs under CPU autocast to bfloat16.

With --compile the forward and loss are compiled with torch.compile (inductor);
the optimizer stays eager. The first step then includes compilation: its wall
time is reported as first_step_s, and compile_s is first_step_s minus the
steady-state median. The W warmup steps (the first one included) are never
timed.

Prints one line of JSON; tokens_per_s is B*T divided by the median step time,
which is robust to scheduler hiccups. matmul_gflops is the rate of an M^3
matmul of the same dtype in the same threads (median of 5), measured in this
process after training, for MFU.
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
from golden import next_token_loss, param_groups  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", required=True, help="HF-style config.json")
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps before timing")
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    p.add_argument("--compile", action="store_true", help="compile forward + loss with torch.compile")
    p.add_argument("--attn", choices=("sdpa", "eager"), default="sdpa",
                   help="transformers attention implementation (sdpa is its default)")
    p.add_argument("--matmul-size", type=int, default=1024, help="matmul probe size; 0 skips it")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="where to train; on cuda steps are timed after synchronizing")
    return p.parse_args(argv)


def matmul_gflops(n, dtype, repeats=5):
    """Rate of an [n, n] x [n, n] matmul, median of `repeats` after one warm-up."""
    with torch.no_grad():
        a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
        c = torch.mm(a, b)
        seconds = []
        for _ in range(repeats):
            start = time.perf_counter()
            torch.mm(a, b, out=c)
            seconds.append(time.perf_counter() - start)
    return 2.0 * n ** 3 / statistics.median(seconds) / 1e9


def build_model(config_path, attn):
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    config = LlamaConfig.from_json_file(config_path)
    config._attn_implementation = attn
    config.use_cache = False
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.float32)
    model.train()
    return model


def main(argv=None):
    args = parse_args(argv)
    if args.steps < 1:
        sys.exit("error: --steps must be at least 1")
    if args.compile and args.warmup < 1:
        sys.exit("error: --compile needs --warmup >= 1 (the first step compiles)")

    torch.set_num_threads(args.threads)
    model = build_model(args.config, args.attn).to(args.device)
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(param_groups(model, 0.1), lr=3e-4, betas=(0.9, 0.95))
    tokens = torch.randint(0, model.config.vocab_size, (args.batch, args.seq + 1), device=args.device)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)

    # Mixed precision: weights and optimizer state stay fp32, matmuls run bf16.
    autocast = (torch.autocast(args.device, dtype=torch.bfloat16) if args.dtype == "bf16"
                else contextlib.nullcontext())

    def loss_of(batch):
        return next_token_loss(model, batch)[1]

    loss_fn = torch.compile(loss_of) if args.compile else loss_of

    times, first_step_s = [], None
    for step in range(args.warmup + args.steps):
        sync()
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with autocast:
            loss = loss_fn(tokens)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        opt.step()
        sync()
        elapsed = time.perf_counter() - start
        if step == 0:
            first_step_s = elapsed
        if step >= args.warmup:
            times.append(elapsed)

    median = statistics.median(times)
    result = {
        "engine": "torch.compile" if args.compile else "pytorch-eager",
        "tokens_per_s": args.batch * args.seq / median,
        "step_s_median": median,
        "first_step_s": first_step_s,
        "compile_s": (first_step_s - median) if args.compile else None,
        "final_loss": loss.item(),
        "steps": args.steps,
        "warmup": args.warmup,
        "threads": args.threads,
        "params": n_params,
        "batch": args.batch,
        "seq": args.seq,
        "dtype": args.dtype,
        "attn": args.attn,
        "torch": torch.__version__,
        "device": args.device,
        "peak_device_mib": (torch.cuda.max_memory_allocated() / 2 ** 20) if args.device == "cuda" else 0,
    }
    if args.matmul_size > 0:
        dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
        result["matmul_size"] = args.matmul_size
        result["matmul_gflops"] = matmul_gflops(args.matmul_size, dtype)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
