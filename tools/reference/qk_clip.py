"""QK-clip (Kimi K2's MuonClip) on given attention weights and inputs, in torch with
transformers' rotary and grouped-query helpers: the reference xtrain's optim.muon.qk_clip_tau is
held to (tests/unit/optim/qk_clip_test.cpp).

For each query head h: S_h = max over the batch, the queries and the keys each query sees
(causal) of q.k times head_dim^-0.5; tau is chosen here between the heads' logits (the midpoint
of the 2nd and 3rd largest) so that some heads clip and some do not; gamma_h = min(1, tau / S_h);
query rows of head h scaled by sqrt(gamma_h), key rows of kv head j by the sqrt of the smallest
gamma of its query heads; biases with their weights. Then S_h again with the clipped weights.

Reads --inputs (safetensors): x [B, T, hidden], q_weight, q_bias, k_weight, k_bias,
hyper [heads, kv_heads, rope_theta] (float64). Writes --out: logit_max [H], tau (float64 [1]),
q_weight, q_bias, k_weight, k_bias (clipped), logit_max_after [H].
"""
import argparse

import torch
from safetensors.torch import load_file, save_file
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb, repeat_kv


def logit_max(x, qw, qb, kw, kb, heads, kv_heads, theta):
    batch, seq, _ = x.shape
    dim = qw.shape[0] // heads
    q = torch.nn.functional.linear(x, qw, qb).view(batch, seq, heads, dim).transpose(1, 2)
    k = torch.nn.functional.linear(x, kw, kb).view(batch, seq, kv_heads, dim).transpose(1, 2)
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    freqs = torch.outer(torch.arange(seq, dtype=torch.float32), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    q, k = apply_rotary_pos_emb(q, k, emb.cos()[None], emb.sin()[None])
    k = repeat_kv(k, heads // kv_heads)
    scores = torch.matmul(q, k.transpose(2, 3)) * dim ** -0.5
    hidden = torch.ones(seq, seq, dtype=torch.bool).triu(1)
    return scores.masked_fill(hidden, float("-inf")).amax(dim=(0, 2, 3))


def scale_rows(t, factor):
    rows_per_head = t.shape[0] // factor.numel()
    shape = (-1,) + (1,) * (t.dim() - 1)
    return t * factor.sqrt().to(t.dtype).repeat_interleave(rows_per_head).view(shape)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    t = load_file(args.inputs)
    heads, kv_heads, theta = t["hyper"].tolist()
    heads, kv_heads = int(heads), int(kv_heads)
    x, qw, qb, kw, kb = (t[n] for n in ("x", "q_weight", "q_bias", "k_weight", "k_bias"))
    s = logit_max(x, qw, qb, kw, kb, heads, kv_heads, theta)
    ranked = s.double().sort(descending=True).values
    tau = float((ranked[1] + ranked[2]) / 2)
    s64 = s.double()
    gamma = torch.where(s64 > tau, tau / s64, torch.ones_like(s64))
    key_gamma = gamma.view(kv_heads, -1).min(dim=1).values
    qw, qb = scale_rows(qw, gamma), scale_rows(qb, gamma)
    kw, kb = scale_rows(kw, key_gamma), scale_rows(kb, key_gamma)
    after = logit_max(x, qw, qb, kw, kb, heads, kv_heads, theta)
    save_file({"logit_max": s.contiguous(), "tau": torch.tensor([tau], dtype=torch.float64),
               "q_weight": qw.contiguous(), "q_bias": qb.contiguous(), "k_weight": kw.contiguous(),
               "k_bias": kb.contiguous(), "logit_max_after": after.contiguous()}, args.out)


if __name__ == "__main__":
    main()
