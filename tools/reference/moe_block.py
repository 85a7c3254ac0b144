#!/usr/bin/env python3
"""Golden outputs of transformers' Qwen3-MoE sparse block, for the same weights and inputs.

The block is transformers' own Qwen3MoeSparseMoeBlock (its router `gate`, its stacked experts),
run in float32; the load-balancing loss is transformers' load_balancing_loss_func on the
block's router logits.

Usage:
    moe_block.py --inputs IN.safetensors --out OUT.safetensors --experts E --top-k K
                 --intermediate I [--no-norm-topk-prob]

Inputs (IN.safetensors): x [T, H], grad_out [T, H], gate.weight [E, H],
    experts.gate_up_proj [E, 2I, H], experts.down_proj [E, H, I].
Outputs: y [T, H]; logits [T, E]; aux, transformers' load-balancing loss; and the gradients
    grad.x, grad.gate.weight, grad.experts.gate_up_proj, grad.experts.down_proj of
    sum(y * grad_out) + aux.
"""

import argparse

import torch
from safetensors.torch import load_file, save_file
from transformers import Qwen3MoeConfig
from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock, load_balancing_loss_func


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--inputs", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--experts", type=int, required=True)
    p.add_argument("--top-k", type=int, required=True)
    p.add_argument("--intermediate", type=int, required=True)
    p.add_argument("--no-norm-topk-prob", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    inputs = load_file(args.inputs)
    x = inputs["x"].clone().requires_grad_(True)
    config = Qwen3MoeConfig(hidden_size=x.shape[-1], num_experts=args.experts, num_experts_per_tok=args.top_k,
                            moe_intermediate_size=args.intermediate, norm_topk_prob=not args.no_norm_topk_prob)
    block = Qwen3MoeSparseMoeBlock(config).float()
    names = ["gate.weight", "experts.gate_up_proj", "experts.down_proj"]
    block.load_state_dict({name: inputs[name] for name in names}, strict=True)
    logits, weights, experts = block.gate(x)
    y = block.experts(x, experts, weights)
    aux = load_balancing_loss_func((logits,), args.experts, args.top_k)
    ((y * inputs["grad_out"]).sum() + aux).backward()
    params = dict(block.named_parameters())
    out = {"y": y.detach(), "logits": logits.detach().float(), "aux": aux.detach().reshape(()), "grad.x": x.grad}
    out.update({"grad." + name: params[name].grad for name in names})
    save_file({k: v.contiguous() for k, v in out.items()}, args.out)


if __name__ == "__main__":
    main()
