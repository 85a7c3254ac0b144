"""torch.optim.Muon (the project's torch) on given parameters and gradients: the reference
xtrain's optim.name muon is held to (tests/unit/optim/muon_test.cpp).

torch.optim.Muon takes 2-D parameters only. A 3-D parameter [experts, A, B] is run as its
experts' matrices, each a parameter of its own (its own momentum buffer and [A, B] scale):
the rule xtrain follows for expert stacks.

Reads --inputs (safetensors): param.<i>, grad.<t>.<i> (t from 0), lr [T] (float64),
hyper [momentum, nesterov (0/1), weight_decay, adjust (0 original, 1 match_rms_adamw), ns_steps]
(float64). Writes --out: param.<i>, momentum.<i>.
"""
import argparse

import torch
from safetensors.torch import load_file, save_file


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    inputs = load_file(args.inputs)
    momentum, nesterov, weight_decay, adjust, ns_steps = inputs["hyper"].tolist()
    lrs = inputs["lr"].tolist()
    count = sum(1 for key in inputs if key.startswith("param."))
    # Each parameter as a list of matrices (one for 2-D, one per expert for 3-D).
    params = []
    for i in range(count):
        p = inputs[f"param.{i}"]
        slices = [p] if p.dim() == 2 else list(p.unbind(0))
        params.append([s.clone().requires_grad_(True) for s in slices])
    flat = [s for group in params for s in group]
    optimizer = torch.optim.Muon(flat, lr=lrs[0], weight_decay=weight_decay, momentum=momentum,
                                 nesterov=bool(nesterov), ns_steps=int(ns_steps),
                                 adjust_lr_fn="match_rms_adamw" if adjust else "original")
    for t, lr in enumerate(lrs):
        for group in optimizer.param_groups:
            group["lr"] = lr
        for i, group in enumerate(params):
            g = inputs[f"grad.{t}.{i}"]
            slices = [g] if g.dim() == 2 else list(g.unbind(0))
            for s, gs in zip(group, slices):
                s.grad = gs.clone()
        optimizer.step()
    out = {}
    for i, group in enumerate(params):
        stack = (lambda xs: xs[0] if len(xs) == 1 else torch.stack(xs))
        out[f"param.{i}"] = stack([s.detach() for s in group]).contiguous()
        out[f"momentum.{i}"] = stack([optimizer.state[s]["momentum_buffer"] for s in group]).contiguous()
    save_file(out, args.out)


if __name__ == "__main__":
    main()
