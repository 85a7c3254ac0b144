#!/usr/bin/env python3
"""Golden outputs of transformers' Qwen3-MoE or DeepSeek-V3 MoE block, for the same weights.

The block is transformers' own Qwen3MoeSparseMoeBlock (softmax router `gate`, stacked experts)
or DeepseekV3MoE (sigmoid router with the expert bias `gate.e_score_correction_bias`,
group-limited routing, a routed scaling factor, `shared_experts`), run in float32. For
Qwen3-MoE the load-balancing loss is transformers' load_balancing_loss_func on the block's
router logits.

Usage:
    moe_block.py --inputs IN.safetensors --out OUT.safetensors --experts E --top-k K
                 --intermediate I [--no-norm-topk-prob]
                 [--deepseek-v3 --n-group G --topk-group TG --scaling S --shared N]

Inputs (IN.safetensors): x [T, H], grad_out [T, H], and the block's parameters (and buffer)
    under transformers' names.
Outputs: y [T, H]; logits [T, E]; aux (Qwen3-MoE); and grad.x and grad.<parameter> of
    sum(y * grad_out) (+ aux for Qwen3-MoE).
"""

import argparse

import torch
from safetensors.torch import load_file, save_file
from transformers import DeepseekV3Config, Qwen3MoeConfig
from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3MoE
from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock, load_balancing_loss_func


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--inputs", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--experts", type=int, required=True)
    p.add_argument("--top-k", type=int, required=True)
    p.add_argument("--intermediate", type=int, required=True)
    p.add_argument("--no-norm-topk-prob", action="store_true")
    p.add_argument("--deepseek-v3", action="store_true")
    p.add_argument("--n-group", type=int, default=1)
    p.add_argument("--topk-group", type=int, default=1)
    p.add_argument("--scaling", type=float, default=1.0)
    p.add_argument("--shared", type=int, default=0)
    args = p.parse_args()
    torch.set_num_threads(1)
    inputs = load_file(args.inputs)
    x = inputs["x"].clone().requires_grad_(True)
    if args.deepseek_v3:
        config = DeepseekV3Config(hidden_size=x.shape[-1], n_routed_experts=args.experts,
                                  num_experts_per_tok=args.top_k, moe_intermediate_size=args.intermediate,
                                  norm_topk_prob=not args.no_norm_topk_prob, n_group=args.n_group,
                                  topk_group=args.topk_group, routed_scaling_factor=args.scaling,
                                  n_shared_experts=args.shared)
        block = DeepseekV3MoE(config).float()
    else:
        config = Qwen3MoeConfig(hidden_size=x.shape[-1], num_experts=args.experts, num_experts_per_tok=args.top_k,
                                moe_intermediate_size=args.intermediate, norm_topk_prob=not args.no_norm_topk_prob)
        block = Qwen3MoeSparseMoeBlock(config).float()
    state = block.state_dict()
    block.load_state_dict({name: inputs[name] for name in state}, strict=True)
    logits = block.gate(x)[0]
    y = block(x.unsqueeze(0)).squeeze(0)
    loss = (y * inputs["grad_out"]).sum()
    out = {"y": y.detach(), "logits": logits.detach().float()}
    if not args.deepseek_v3:
        aux = load_balancing_loss_func((logits,), args.experts, args.top_k)
        loss = loss + aux
        out["aux"] = aux.detach().reshape(())
    loss.backward()
    out["grad.x"] = x.grad
    out.update({"grad." + name: param.grad for name, param in block.named_parameters()})
    save_file({k: v.contiguous() for k, v in out.items()}, args.out)


if __name__ == "__main__":
    main()
