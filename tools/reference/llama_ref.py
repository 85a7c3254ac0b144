"""Readable PyTorch reference of Hugging Face `LlamaForCausalLM`.

This mirrors the numerics of transformers' `modeling_llama` (eager attention,
no KV cache, no padding mask) and uses the same module names, so that
`state_dict()` keys match HF checkpoints one to one:

    model.embed_tokens.weight
    model.layers.{i}.input_layernorm.weight
    model.layers.{i}.self_attn.{q,k,v,o}_proj.weight
    model.layers.{i}.post_attention_layernorm.weight
    model.layers.{i}.mlp.{gate,up,down}_proj.weight
    model.norm.weight
    lm_head.weight            (absent when tie_word_embeddings is true)

It is the ground truth the C++ engine is compared against, so clarity and
exact conventions matter more than speed.
"""

import json
import math
import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

import safetensors_np

# Older HF exports stored the rotary table as a buffer; HF itself ignores it
# on load, and it carries no information beyond rope_theta.
_IGNORED_CHECKPOINT_SUFFIXES = (".self_attn.rotary_emb.inv_freq",)


@dataclass
class LlamaConfig:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    max_position_embeddings: int = 2048
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = False

    @property
    def head_dim(self):
        return self.hidden_size // self.num_attention_heads


def config_from_dict(d):
    """Builds a LlamaConfig from a parsed HF config.json, applying HF defaults.

    Features this reference does not implement are rejected rather than
    silently ignored, so a comparison never runs against the wrong model.
    """
    if d.get("rope_scaling"):
        raise NotImplementedError(f"rope_scaling is not supported: {d['rope_scaling']}")
    if d.get("hidden_act", "silu") != "silu":
        raise NotImplementedError(f"hidden_act {d['hidden_act']!r} is not supported")
    if d.get("attention_bias") or d.get("mlp_bias"):
        raise NotImplementedError("attention_bias / mlp_bias are not supported")
    heads = d["num_attention_heads"]
    cfg = LlamaConfig(
        vocab_size=d["vocab_size"],
        hidden_size=d["hidden_size"],
        intermediate_size=d["intermediate_size"],
        num_hidden_layers=d["num_hidden_layers"],
        num_attention_heads=heads,
        # HF falls back to multi-head attention when the field is absent.
        num_key_value_heads=d.get("num_key_value_heads") or heads,
        max_position_embeddings=d.get("max_position_embeddings", 2048),
        rope_theta=float(d.get("rope_theta", 10000.0)),
        rms_norm_eps=float(d.get("rms_norm_eps", 1e-6)),
        tie_word_embeddings=bool(d.get("tie_word_embeddings", False)),
    )
    if cfg.hidden_size % heads != 0:
        raise ValueError(f"hidden_size {cfg.hidden_size} not divisible by {heads} heads")
    if d.get("head_dim") not in (None, cfg.head_dim):
        raise NotImplementedError(f"head_dim {d['head_dim']} != hidden_size / heads")
    if heads % cfg.num_key_value_heads != 0:
        raise ValueError(f"{heads} heads not divisible by {cfg.num_key_value_heads} kv heads")
    return cfg


def load_config(path):
    with open(path) as f:
        return config_from_dict(json.load(f))


class LlamaRMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        # Statistics in float32 regardless of the compute dtype, as HF does;
        # the weight multiply happens after casting back.
        dtype = x.dtype
        x = x.float()
        var = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + self.eps)
        return self.weight * x.to(dtype)


def rotary_cos_sin(cfg, seq_len, dtype, device=None):
    """Returns cos/sin tables of shape [T, head_dim] for positions 0..T-1."""
    d = cfg.head_dim
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, device=device).float() / d))
    positions = torch.arange(seq_len, device=device).float()
    freqs = torch.outer(positions, inv_freq)
    # HF duplicates the frequencies (not interleaved): dims i and i + d/2
    # form a rotation pair.
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rotary(x, cos, sin):
    """x: [B, H, T, D]; cos/sin: [T, D] broadcast over batch and heads."""
    return x * cos + rotate_half(x) * sin


def repeat_kv(x, n_rep):
    """[B, Hkv, T, D] -> [B, Hkv * n_rep, T, D]; kv head j serves query
    heads j*n_rep .. j*n_rep + n_rep - 1 (HF's `repeat_kv`)."""
    return x if n_rep == 1 else x.repeat_interleave(n_rep, dim=1)


class LlamaAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        h, d, kvh = cfg.num_attention_heads, cfg.head_dim, cfg.num_key_value_heads
        self.q_proj = nn.Linear(cfg.hidden_size, h * d, bias=False)
        self.k_proj = nn.Linear(cfg.hidden_size, kvh * d, bias=False)
        self.v_proj = nn.Linear(cfg.hidden_size, kvh * d, bias=False)
        self.o_proj = nn.Linear(h * d, cfg.hidden_size, bias=False)

    def forward(self, x, cos, sin):
        cfg = self.cfg
        b, t, _ = x.shape
        h, d, kvh = cfg.num_attention_heads, cfg.head_dim, cfg.num_key_value_heads
        q = self.q_proj(x).view(b, t, h, d).transpose(1, 2)
        k = self.k_proj(x).view(b, t, kvh, d).transpose(1, 2)
        v = self.v_proj(x).view(b, t, kvh, d).transpose(1, 2)
        q = apply_rotary(q, cos.to(q.dtype), sin.to(q.dtype))
        k = apply_rotary(k, cos.to(k.dtype), sin.to(k.dtype))
        k = repeat_kv(k, h // kvh)
        v = repeat_kv(v, h // kvh)

        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(d)
        future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
        # Softmax in float32 for stability, then back to the compute dtype.
        probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(probs, v)
        out = out.transpose(1, 2).reshape(b, t, h * d)
        return self.o_proj(out)


class LlamaMLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.input_layernorm = LlamaRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = LlamaAttention(cfg)
        self.post_attention_layernorm = LlamaRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = LlamaMLP(cfg)

    def forward(self, x, cos, sin):
        h = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return h + self.mlp(self.post_attention_layernorm(h))


class LlamaModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(LlamaDecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = LlamaRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, input_ids):
        t = input_ids.shape[1]
        if t > self.cfg.max_position_embeddings:
            raise ValueError(f"sequence length {t} exceeds max_position_embeddings "
                             f"{self.cfg.max_position_embeddings}")
        x = self.embed_tokens(input_ids)
        # Tables are built in float32 and cast per use, like HF's rotary module.
        cos, sin = rotary_cos_sin(self.cfg, t, torch.float32, input_ids.device)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.norm(x)


class LlamaRef(nn.Module):
    """Decoder-only Llama language model with HF parameter names."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.model = LlamaModel(cfg)
        # With tied embeddings there is no lm_head module at all, so the
        # state_dict matches HF checkpoints, which omit lm_head.weight.
        self.lm_head = (None if cfg.tie_word_embeddings
                        else nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False))
        self.reset_parameters()

    def reset_parameters(self):
        """GPT-2 style init: N(0, 0.02), residual output projections scaled
        by 1/sqrt(2 * layers), norm weights one. Uses the global torch RNG."""
        std = 0.02
        residual_std = std / math.sqrt(2 * self.cfg.num_hidden_layers)
        with torch.no_grad():
            for name, module in self.named_modules():
                if isinstance(module, (nn.Linear, nn.Embedding)):
                    is_residual = name.endswith(("o_proj", "down_proj"))
                    module.weight.normal_(0.0, residual_std if is_residual else std)
                elif isinstance(module, LlamaRMSNorm):
                    module.weight.fill_(1.0)

    def output_weight(self):
        return self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight

    def forward(self, input_ids):
        """input_ids: int64 [B, T] -> logits [B, T, vocab]."""
        return F.linear(self.model(input_ids), self.output_weight())

    def loss(self, tokens):
        """tokens: int64 [B, T+1]. Position t of tokens[:, :-1] predicts
        tokens[:, t+1]; returns (logits [B, T, V], mean cross-entropy)."""
        inputs, targets = tokens[:, :-1], tokens[:, 1:]
        logits = self(inputs)
        # Cross-entropy in float32 whatever the compute dtype, as HF does.
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]),
                               targets.reshape(-1))
        return logits, loss

    @classmethod
    def from_pretrained(cls, directory, dtype=torch.float32):
        """Loads config.json and model.safetensors (or a sharded
        model.safetensors.index.json) from an HF-style folder."""
        cfg = load_config(os.path.join(directory, "config.json"))
        state = _load_checkpoint_tensors(directory)
        for key in list(state):
            if key.endswith(_IGNORED_CHECKPOINT_SUFFIXES):
                del state[key]

        model = cls(cfg)
        expected = model.state_dict()
        missing = sorted(set(expected) - set(state))
        extra = sorted(set(state) - set(expected))
        if missing or extra:
            raise KeyError(f"checkpoint {directory} does not match the model: "
                           f"missing {missing}, unexpected {extra}")
        for key, tensor in state.items():
            if tuple(tensor.shape) != tuple(expected[key].shape):
                raise ValueError(f"{key}: checkpoint shape {tuple(tensor.shape)} != "
                                 f"model shape {tuple(expected[key].shape)}")
        model.load_state_dict(state, strict=True)
        return model.to(dtype)


def _load_checkpoint_tensors(directory):
    single = os.path.join(directory, "model.safetensors")
    if os.path.exists(single):
        return safetensors_np.load_file(single)
    index_path = os.path.join(directory, "model.safetensors.index.json")
    if not os.path.exists(index_path):
        raise FileNotFoundError(f"{directory}: no model.safetensors or index file")
    with open(index_path) as f:
        shards = sorted(set(json.load(f)["weight_map"].values()))
    state = {}
    for shard in shards:
        for key, tensor in safetensors_np.load_file(os.path.join(directory, shard)).items():
            if key in state:
                raise KeyError(f"{key} appears in more than one shard")
            state[key] = tensor
    return state
