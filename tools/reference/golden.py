#!/usr/bin/env python3
"""Produces golden forward/backward/optimizer outputs for a Llama, Qwen2 or Qwen3 checkpoint.

The model is the Hugging Face `transformers` class config.json names (LlamaForCausalLM,
Qwen2ForCausalLM, Qwen3ForCausalLM), loaded with `from_pretrained` in float32 with eager
attention, so the golden numbers are those of the library the exported folders are meant for.

Usage:
    golden.py --checkpoint DIR --tokens TOKENS.safetensors --out OUT.safetensors
              [--train-steps K --lr LR --betas B1 B2 --eps EPS
               --weight-decay WD --grad-clip C --threads N [--float64-trajectory]]

Inputs:
    DIR                  HF-style folder with config.json + model.safetensors
                         (or a sharded model.safetensors.index.json)
    TOKENS.safetensors   tensor `input_ids`, integer [B, T+1]

Outputs (one safetensors file, all float32 unless noted):
    logits               [B, T, V] for inputs tokens[:, :-1]
    loss                 0-dim mean cross-entropy against tokens[:, 1:]
    grad.<hf name>       d loss / d parameter, at the loaded weights
  and when K > 0, after K AdamW steps on the same batch:
    train_losses         float64 [K], loss of each step before its update
    train_grad_norms     float64 [K], global L2 gradient norm before clipping
    final.<hf name>      parameters after the last step
  and with --float64-trajectory, the same K steps from the same weights in float64:
    grad64.<hf name>     float64 d loss / d parameter at the loaded weights
    final64.<hf name>    float64 parameters after the last step, the yardstick of the
                         float32 runs' own rounding noise (see float64_everywhere)

Parameter names are those of `named_parameters()`: with tied embeddings the
shared matrix appears once, as model.embed_tokens.weight, and there is no
lm_head.weight entry.
"""

import argparse
import os

import torch
from safetensors.torch import load_file, save_file
from torch.overrides import TorchFunctionMode


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", required=True, help="folder with config.json + model.safetensors")
    p.add_argument("--tokens", required=True, help="safetensors file holding input_ids [B, T+1]")
    p.add_argument("--out", required=True, help="output safetensors file")
    p.add_argument("--train-steps", type=int, default=0)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--betas", type=float, nargs=2, default=(0.9, 0.95), metavar=("B1", "B2"))
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0, help="max global grad norm; <= 0 disables")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--float64-trajectory", action="store_true",
                   help="also train the K steps in float64 and write final64.<name>")
    p.add_argument("--output-router-logits", action="store_true",
                   help="mixtures of experts: the loss adds router_aux_loss_coef x transformers' load-balancing loss")
    return p.parse_args(argv)


def param_groups(model, weight_decay):
    """Matrices (embeddings, projections) decay; 1-D params (norm weights) do not."""
    named = list(model.named_parameters())  # tied weights appear once
    return [
        {"params": [p for _, p in named if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for _, p in named if p.dim() < 2], "weight_decay": 0.0},
    ]


def load_model(directory, dtype=torch.float32):
    """Loads an HF Llama folder; any missing, unexpected or mis-shaped tensor is an
    error, so a comparison never runs against partly initialised weights."""
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    # Loading reports are checked below; the library's own warnings would only repeat them.
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    # The class config.json names: LlamaForCausalLM, Qwen2ForCausalLM or Qwen3ForCausalLM.
    model, info = AutoModelForCausalLM.from_pretrained(
        directory, dtype=dtype, attn_implementation="eager", output_loading_info=True)
    # Rotary tables are never stored in checkpoints, some older exports carry them anyway.
    unexpected = [k for k in info.get("unexpected_keys", []) if not k.endswith("rotary_emb.inv_freq")]
    problems = {"missing": sorted(info.get("missing_keys", [])),
                "unexpected": sorted(unexpected),
                "mismatched": sorted(str(m) for m in info.get("mismatched_keys", []))}
    if any(problems.values()):
        raise KeyError(f"checkpoint {directory} does not match {type(model).__name__}: {problems}")
    # Some modules keep float32 whatever the dtype asked for (DeepSeek-V3's router): the float64
    # trajectory is float64 throughout.
    if dtype == torch.float64:
        model.double()
    model.train()  # attention_dropout is 0 in exported configs; train() only selects training paths
    return model


def next_token_loss(model, tokens, router_logits=False):
    """tokens: int64 [B, T+1]. Position t of tokens[:, :-1] predicts tokens[:, t+1];
    returns (logits [B, T, V], mean cross-entropy computed in float32). With router_logits, the
    model's own loss: the cross-entropy plus router_aux_loss_coef x load_balancing_loss_func over
    every MoE layer's router logits."""
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    if router_logits:
        out = model(input_ids=inputs, labels=targets, shift_labels=targets.contiguous(), output_router_logits=True,
                    use_cache=False)
        return out.logits, out.loss
    logits = model(input_ids=inputs, use_cache=False).logits
    # HF's causal-LM loss, given the targets already aligned with the positions.
    loss = model.loss_function(logits=logits, labels=None, vocab_size=model.config.vocab_size,
                               shift_labels=targets.contiguous())
    return logits, loss


def train(model, tokens, args):
    """K steps of clipping + torch.optim.AdamW on one batch; returns the losses, the gradient norms
    before clipping and the parameters after the last step, by name."""
    # foreach=False pins the plain per-tensor update; maximize/amsgrad off.
    opt = torch.optim.AdamW(param_groups(model, args.weight_decay), lr=args.lr,
                            betas=tuple(args.betas), eps=args.eps, foreach=False)
    losses, norms = [], []
    for _ in range(args.train_steps):
        opt.zero_grad(set_to_none=True)
        _, step_loss = next_token_loss(model, tokens, args.output_router_logits)
        step_loss.backward()
        params = [p for p in model.parameters() if p.grad is not None]
        if args.grad_clip > 0:
            norm = torch.nn.utils.clip_grad_norm_(params, max_norm=args.grad_clip)
        else:
            norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in params]))
        losses.append(step_loss.item())
        norms.append(float(norm))
        opt.step()
    return losses, norms, {name: p.detach().clone() for name, p in model.named_parameters()}


class Float64Everywhere(TorchFunctionMode):
    """Runs a float64 model in float64 throughout. transformers computes some steps in float32
    whatever the model's dtype (RMSNorm's variance, the attention and router softmax, the rotary
    angles, the loss's upcast): here every request for float32 becomes float64, and an operation
    that still returns a float32 tensor is an error, so the trajectory is float64 from end to end.
    Its distance from a float32 run is that run's own rounding noise."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = {k: torch.float64 if v is torch.float32 else v for k, v in (kwargs or {}).items()}
        args = tuple(torch.float64 if a is torch.float32 else a for a in args)
        if func is torch.Tensor.float:
            func = torch.Tensor.double
        result = func(*args, **kwargs)
        for tensor in result if isinstance(result, (tuple, list)) else (result,):
            if isinstance(tensor, torch.Tensor) and tensor.dtype == torch.float32:
                raise TypeError(f"{getattr(func, '__name__', func)} returned float32 in the float64 trajectory")
        return result


def load_tokens(path, vocab_size):
    tensors = load_file(path)
    if "input_ids" not in tensors:
        raise KeyError(f"{path}: no tensor named input_ids")
    tokens = tensors["input_ids"]
    if tokens.dim() != 2 or tokens.shape[1] < 2 or tokens.dtype.is_floating_point:
        raise ValueError(f"input_ids must be integer [B, T+1] with T >= 1, got "
                         f"{tokens.dtype} {list(tokens.shape)}")
    tokens = tokens.long()
    if tokens.min() < 0 or tokens.max() >= vocab_size:
        raise ValueError(f"input_ids out of range [0, {vocab_size})")
    return tokens


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    # Reproducibility across runs; CPU kernels used here all have
    # deterministic implementations, so this never raises in practice.
    torch.use_deterministic_algorithms(True)

    model = load_model(args.checkpoint)
    tokens = load_tokens(args.tokens, model.config.vocab_size)
    out = {}

    logits, loss = next_token_loss(model, tokens, args.output_router_logits)
    loss.backward()
    out["logits"] = logits.detach().float().contiguous()
    out["loss"] = loss.detach().float()
    for name, p in model.named_parameters():
        out[f"grad.{name}"] = p.grad.detach().clone()

    if args.train_steps > 0:
        losses, norms, final = train(model, tokens, args)
        out["train_losses"] = torch.tensor(losses, dtype=torch.float64)
        out["train_grad_norms"] = torch.tensor(norms, dtype=torch.float64)
        out.update({f"final.{name}": p for name, p in final.items()})
    if args.float64_trajectory and args.train_steps > 0:
        model64 = load_model(args.checkpoint, dtype=torch.float64)
        if model64._can_set_experts_implementation():
            model64.set_experts_implementation("eager")  # grouped_mm has no float64 kernel
        with Float64Everywhere():
            _, loss64 = next_token_loss(model64, tokens, args.output_router_logits)
            loss64.backward()
            out.update({f"grad64.{name}": p.grad.detach().clone() for name, p in model64.named_parameters()})
            _, _, final64 = train(model64, tokens, args)
        out.update({f"final64.{name}": p for name, p in final64.items()})

    import transformers
    metadata = {
        "checkpoint": os.path.abspath(args.checkpoint),
        "train_steps": str(args.train_steps),
        "lr": repr(args.lr),
        "betas": f"{args.betas[0]!r} {args.betas[1]!r}",
        "eps": repr(args.eps),
        "weight_decay": repr(args.weight_decay),
        "grad_clip": repr(args.grad_clip),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
    save_file(out, args.out, metadata=metadata)
    print(f"loss {loss.item():.6f}" + (f"  final-step loss {out['train_losses'][-1].item():.6f}"
                                       if args.train_steps > 0 else ""))


if __name__ == "__main__":
    main()
