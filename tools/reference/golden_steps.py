"""The `golden` command's common part for the tiny-model golden tools (golden_t5.py, golden_vit.py):
its arguments, and the AdamW trajectory that --steps adds to the outputs.

trajectory: K steps of clipping (1.0) + torch.optim.AdamW (betas 0.9, 0.95, eps 1e-8, the decay
where the tool's `decays` says) on one batch, from a fresh load of the checkpoint in float32 and
again in float64 (golden.py's Float64Everywhere), the yardstick of float32's own rounding.
"""
import torch

from golden import Float64Everywhere


def add_golden_parser(sub):
    """The `golden` subcommand, whose arguments every golden tool takes alike."""
    g = sub.add_parser("golden")
    g.add_argument("--checkpoint", required=True)
    g.add_argument("--batch", required=True)
    g.add_argument("--out", required=True)
    g.add_argument("--steps", type=int, default=0)
    g.add_argument("--lr", type=float, default=1e-3)
    g.add_argument("--weight-decay", type=float, default=1.0)
    return g


def prepare():
    """One thread and deterministic kernels, so that the outputs are the same on every run."""
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


def train(model, loss_of, decays, args):
    """args.steps steps of clipping + torch.optim.AdamW on one batch (loss_of(model) gives the
    step's loss): the step losses and the parameters after the last step."""
    named = list(model.named_parameters())
    opt = torch.optim.AdamW([{"params": [p for n, p in named if decays(n, p)], "weight_decay": args.weight_decay},
                             {"params": [p for n, p in named if not decays(n, p)], "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, foreach=False)
    losses = []
    for _ in range(args.steps):
        opt.zero_grad(set_to_none=True)
        loss = loss_of(model)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.grad is not None], max_norm=1.0)
        losses.append(loss.item())
        opt.step()
    return losses, {n: p.detach().clone() for n, p in model.named_parameters()}


def trajectory(load, loss_of, decays, args, name=lambda n: n):
    """train_losses [K], final.<name> (float32) and final64.<name> (float64) from models that
    load() gives in training mode; name maps a named_parameters() name to the checkpoint's."""
    losses, final = train(load(), loss_of, decays, args)
    result = {"train_losses": torch.tensor(losses, dtype=torch.float64)}
    result.update({f"final.{name(n)}": p for n, p in final.items()})
    model64 = load().double()
    with Float64Everywhere():
        _, final64 = train(model64, loss_of, decays, args)
    result.update({f"final64.{name(n)}": p for n, p in final64.items()})
    return result
