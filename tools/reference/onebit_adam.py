"""1-bit Adam (Tang et al. 2021, Algorithm 1, with the compressed all-reduce of section 4 as
DeepSpeed implements it), over N simulated workers: the reference xtrain's optim.name
onebit_adam is held to (tests/unit/optim/onebit_adam_test.cpp).

- Warm-up, steps 1..T0 (T0 = freeze_step): AdamW on the gradient averaged over the workers,
  torch.optim.AdamW's arithmetic (decoupled decay, both bias corrections).
- Compression stage, t > T0: v and its bias correction frozen at T0. Each worker folds its own
  gradient into its own momentum, m_w = b1 m_w + (1 - b1) g_w, then the momenta are averaged
  by the error-compensated 1-bit all-reduce, per parameter:
    worker w: x = pad(m_w) + e_w (padded to a multiple of 8 N, zeros);
              s_w = ||x|| / sqrt(len(x)); e_w = x - s_w sign(x)   (sign(0) = +1);
              chunk j of sign(x) goes to worker j;
    server j: y = sum_w sign(x_w)[chunk j] * (s_w / N) + E_j;
              S_j = ||y|| / sqrt(len(y)); E_j = y - S_j sign(y);
    everyone: m = concat_j S_j sign(y_j), cut to the parameter's length.
  The update: p = p (1 - lr wd) - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^T0) + eps).

Reads --inputs (safetensors): param.<i>, decay [P] (int64), lr [T] (float64), hyper [b1, b2,
eps, wd] (float64), freeze_step [1], workers [1], grad.<t>.<w>.<i> (t from 0). Writes --out:
param.<i>, exp_avg.<i>, exp_avg_sq.<i>, worker_error.<w>.<i>, server_error.<w>.<i>.
"""
import argparse
import math

import torch
from safetensors.torch import load_file, save_file


def signs(x):
    return (x >= 0).to(x.dtype) * 2.0 - 1.0


def scale(x):
    return torch.linalg.vector_norm(x) / math.sqrt(x.numel())


def compressed_average(momenta, worker_errors, server_errors):
    """momenta[w]: each worker's flat momentum; errors updated in place; returns the average."""
    n = len(momenta)
    length = momenta[0].numel()
    padded = worker_errors[0].numel()
    chunk = padded // n
    sent_signs, sent_scales = [], []
    for w in range(n):
        x = torch.zeros(padded)
        x[:length] = momenta[w]
        x += worker_errors[w]
        s = scale(x)
        worker_errors[w].copy_(x - s * signs(x))
        sent_signs.append(signs(x))
        sent_scales.append(s)
    scales = torch.stack(sent_scales) * (1.0 / n)
    server_signs, server_scales = [], []
    for j in range(n):
        received = torch.stack([sent_signs[w][j * chunk:(j + 1) * chunk] for w in range(n)])
        y = (received * scales.unsqueeze(1)).sum(0)
        y += server_errors[j]
        s = scale(y)
        server_errors[j].copy_(y - s * signs(y))
        server_signs.append(signs(y))
        server_scales.append(s)
    return torch.cat([server_signs[j] * server_scales[j] for j in range(n)])[:length]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    t = load_file(args.inputs)
    b1, b2, eps, wd = t["hyper"].tolist()
    freeze = int(t["freeze_step"][0])
    n = int(t["workers"][0])
    lrs = t["lr"].tolist()
    count = int(t["decay"].numel())
    params = [t[f"param.{i}"].clone() for i in range(count)]
    decay = [bool(d) for d in t["decay"].tolist()]
    m = [[torch.zeros_like(p) for p in params] for _ in range(n)]
    v = [torch.zeros_like(p) for p in params]
    unit = 8 * n
    padded = [(p.numel() + unit - 1) // unit * unit for p in params]
    worker_errors = [[torch.zeros(padded[i]) for i in range(count)] for _ in range(n)]
    server_errors = [[torch.zeros(padded[i] // n) for i in range(count)] for _ in range(n)]
    for step, lr in enumerate(lrs, start=1):
        grads = [[t[f"grad.{step - 1}.{w}.{i}"] for i in range(count)] for w in range(n)]
        bc1 = 1.0 - b1 ** step
        if step <= freeze:
            bc2_sqrt = math.sqrt(1.0 - b2 ** step)
            for i, p in enumerate(params):
                g = torch.stack([grads[w][i] for w in range(n)]).mean(0)
                if decay[i] and wd != 0.0:
                    p.mul_(1.0 - lr * wd)
                for w in range(n):
                    m[w][i].mul_(b1).add_(g, alpha=1.0 - b1)
                v[i].mul_(b2).addcmul_(g, g, value=1.0 - b2)
                denom = (v[i].sqrt() / bc2_sqrt).add_(eps)
                p.addcdiv_(m[0][i], denom, value=-lr / bc1)
            continue
        bc2_sqrt = math.sqrt(1.0 - b2 ** freeze)
        for i, p in enumerate(params):
            if decay[i] and wd != 0.0:
                p.mul_(1.0 - lr * wd)
            for w in range(n):
                m[w][i].mul_(b1).add_(grads[w][i], alpha=1.0 - b1)
            average = compressed_average([m[w][i].reshape(-1) for w in range(n)],
                                         [worker_errors[w][i] for w in range(n)],
                                         [server_errors[w][i] for w in range(n)])
            for w in range(n):
                m[w][i].copy_(average.view(p.shape))
            denom = v[i].sqrt().div_(bc2_sqrt).add_(eps)
            p.addcdiv_(m[0][i], denom, value=-lr / bc1)
    out = {}
    for i in range(count):
        out[f"param.{i}"] = params[i]
        out[f"exp_avg.{i}"] = m[0][i]
        out[f"exp_avg_sq.{i}"] = v[i]
        for w in range(n):
            out[f"worker_error.{w}.{i}"] = worker_errors[w][i]
            out[f"server_error.{w}.{i}"] = server_errors[w][i]
    save_file({k: x.contiguous() for k, x in out.items()}, args.out)


if __name__ == "__main__":
    main()
