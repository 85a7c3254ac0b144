#!/usr/bin/env python3
"""Multi-token prediction of a DeepSeek-V3 folder, written from the paper (DeepSeek-V3 technical
report, section 2.2) on top of transformers' own layers, as the yardstick of xtrain's.

transformers' DeepseekV3ForCausalLM drops the prediction layers a checkpoint holds
(model.layers.{num_hidden_layers + k - 1}.*, num_nextn_predict_layers of them). Here the main
model is transformers' (from_pretrained, eager attention, float32), and depth k = 1..D is
    h'_k   = eh_proj([enorm(Emb(t_{i+k})); hnorm(h_{k-1})])      (h_0: the main model's final states)
    h_k    = DeepseekV3DecoderLayer_k(h'_k)                       (transformers' layer, causal)
    logits = lm_head(shared_head.norm(h_k))
with the embedding and head shared with the main model, and depth k's loss the mean
cross-entropy of position i against token t_{i+k+1}, for the positions that have one.

Usage:
    mtp.py --checkpoint DIR --tokens TOKENS.safetensors --out OUT.safetensors --weight LAMBDA

TOKENS.safetensors holds input_ids [B, T+1]. OUT holds loss (the main model's), mtp_loss.K
(depth K's) and grad.NAME for every parameter, main and prediction layers alike (the prediction
layers' experts stacked as xtrain names them), of loss + LAMBDA / D x sum_K mtp_loss.K.
"""
import argparse
import json
import os
import re

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file


def folder_tensors(directory):
    index = os.path.join(directory, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) \
        else ["model.safetensors"]
    tensors = {}
    for name in files:
        with safe_open(os.path.join(directory, name), "pt") as f:
            for key in f.keys():
                tensors[key] = f.get_tensor(key)
    return tensors


def prediction_depth(config, layer, stored):
    """Depth modules of layer index `layer`, their weights from the folder's tensors."""
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3DecoderLayer, DeepseekV3RMSNorm

    hidden = config.hidden_size
    depth = torch.nn.Module()
    depth.enorm = DeepseekV3RMSNorm(hidden, eps=config.rms_norm_eps)
    depth.hnorm = DeepseekV3RMSNorm(hidden, eps=config.rms_norm_eps)
    depth.eh_proj = torch.nn.Linear(2 * hidden, hidden, bias=False)
    depth.block = DeepseekV3DecoderLayer(config, layer_idx=layer)
    depth.head_norm = DeepseekV3RMSNorm(hidden, eps=config.rms_norm_eps)
    prefix = f"model.layers.{layer}."
    mine = {k[len(prefix):]: v for k, v in stored.items() if k.startswith(prefix)}
    state = {"enorm.weight": mine.pop("enorm.weight"), "hnorm.weight": mine.pop("hnorm.weight"),
             "eh_proj.weight": mine.pop("eh_proj.weight"), "head_norm.weight": mine.pop("shared_head.norm.weight")}
    mine.pop("embed_tokens.weight", None)  # copies of the shared tables
    mine.pop("shared_head.head.weight", None)
    experts = config.n_routed_experts
    if "mlp.experts.0.gate_proj.weight" in mine:  # stored apart, as transformers' checkpoints do
        gate_up = [torch.cat([mine.pop(f"mlp.experts.{e}.gate_proj.weight"), mine.pop(f"mlp.experts.{e}.up_proj.weight")])
                   for e in range(experts)]
        down = [mine.pop(f"mlp.experts.{e}.down_proj.weight") for e in range(experts)]
        mine["mlp.experts.gate_up_proj"] = torch.stack(gate_up)
        mine["mlp.experts.down_proj"] = torch.stack(down)
    state.update({f"block.{k}": v for k, v in mine.items()})
    missing, unexpected = depth.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise KeyError(f"prediction layer {layer}: missing {missing}, unexpected {unexpected}")
    return depth


def causal_mask(length):
    return torch.full((length, length), float("-inf")).triu(1)[None, None]


def cross_entropy(logits, targets):
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1),
                                             ignore_index=-100)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--tokens", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--weight", type=float, required=True, help="the prediction losses' weight (lambda)")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()

    model = AutoModelForCausalLM.from_pretrained(args.checkpoint, dtype=torch.float32, attn_implementation="eager")
    model.train()
    config = model.config
    stored = folder_tensors(args.checkpoint)
    layers = config.num_hidden_layers
    depth_count = config.num_nextn_predict_layers
    depths = [prediction_depth(config, layers + k, stored) for k in range(depth_count)]
    for depth in depths:
        depth.block.self_attn.config._attn_implementation = "eager"

    tokens = load_file(args.tokens)["input_ids"].long()
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    batch, length = inputs.shape
    positions = torch.arange(length)[None].expand(batch, -1)
    out = model.model(input_ids=inputs, use_cache=False)
    previous = out.last_hidden_state
    loss = cross_entropy(model.lm_head(previous), targets)
    objective = loss
    results = {"loss": loss.detach()}
    embed = model.model.embed_tokens
    mask = causal_mask(length)
    for k, depth in enumerate(depths, start=1):
        ahead = torch.zeros_like(inputs)
        ahead[:, :length - k] = inputs[:, k:]
        x = depth.eh_proj(torch.cat([depth.enorm(embed(ahead)), depth.hnorm(previous)], dim=-1))
        rotary = model.model.rotary_emb(x, positions)
        x = depth.block(x, attention_mask=mask, position_ids=positions, position_embeddings=rotary)
        x = x[0] if isinstance(x, tuple) else x
        previous = x
        labels = torch.full_like(targets, -100)
        labels[:, :length - k] = targets[:, k:]
        depth_loss = cross_entropy(model.lm_head(depth.head_norm(x)), labels)
        results[f"mtp_loss.{k}"] = depth_loss.detach()
        objective = objective + depth_loss * (args.weight / depth_count)
    objective.backward()
    for name, parameter in model.named_parameters():
        results[f"grad.{name}"] = parameter.grad.detach().clone()
    names = {"enorm.weight": "enorm.weight", "hnorm.weight": "hnorm.weight", "eh_proj.weight": "eh_proj.weight",
             "head_norm.weight": "shared_head.norm.weight"}
    for k, depth in enumerate(depths):
        for name, parameter in depth.named_parameters():
            xtrain_name = names.get(name, re.sub(r"^block\.", "", name))
            results[f"grad.model.layers.{layers + k}.{xtrain_name}"] = parameter.grad.detach().clone()
    save_file({k: v.contiguous() for k, v in results.items()}, args.out)


if __name__ == "__main__":
    main()
