#!/usr/bin/env python3
"""TRL's DPOTrainer as the reference of xtrain's data.objective dpo.

    dpo_trl.py make --out DIR --reference REF --data PREFS.jsonl
        two tiny random Llamas that transformers writes (save_pretrained), the policy's first
        weights and the reference, their vocabulary xtrain's byte tokenizer's (256 bytes and EOS
        256), and a preference file of a few pairs, one of them longer than the rows so that its
        completion is cut.
    dpo_trl.py compare --model DIR --reference REF --data PREFS.jsonl --seq-len S --beta B
                       --case LOSS:RUN ... [--tolerance T]
        TRL's loss, gradients and metrics on the whole file as one batch, through TRL's own code:
        DataCollatorForPreference builds the batch (max_length S + 1, TRL's keep_start cut) and
        DPOTrainer._compute_loss computes the loss with the reference model; against xtrain's
        run of one step over the same pairs (metrics.jsonl's step 1, and the gradients as the
        checkpoint's first AdamW moment with beta1 0, which is the gradient itself). Differences
        are relative to the larger of 1 and the figure's scale, and must stay within 1e-6.
"""
import argparse
import json
import os
import sys
import tempfile

import torch

EOS = 256


def byte_ids(text):
    return list(text.encode("utf-8"))


def make(args):
    random_llama(11).save_pretrained(args.out)
    random_llama(12).save_pretrained(args.reference)
    write_pairs(args.data)


def random_llama(seed):
    import transformers
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(vocab_size=EOS + 1, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                      tie_word_embeddings=False, bos_token_id=EOS, eos_token_id=EOS, pad_token_id=EOS)
    model = transformers.LlamaForCausalLM(config).float()
    with torch.no_grad():  # norm gains start at 1: give them values, so the gradients cover them
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn_like(p))
    return model


def write_pairs(path):
    pairs = [
        ("What is 2+3? ", "5", "6"),
        ("Name a colour: ", "blue", "a car"),
        ("Say hi. ", "hi", "no thanks, I would rather not"),
        ("Capital of France? ", "Paris", "Paris, Texas, which is much longer than the row and is cut at its end"),
    ]
    with open(path, "w", encoding="utf-8") as f:
        for prompt, chosen, rejected in pairs:
            f.write(json.dumps({"prompt": prompt, "chosen": chosen, "rejected": rejected}) + "\n")


def trainer_for(model_dir, reference_dir, loss, beta):
    import datasets
    import transformers
    from tokenizers import Tokenizer, models
    from trl import DPOConfig, DPOTrainer
    # The batch is built below from xtrain's token ids; this tokenizer only lets the trainer start.
    vocab = {"<unk>": 0, "<eos>": 1}
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="<unk>")), eos_token="<eos>", pad_token="<eos>",
        unk_token="<unk>")
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    reference = transformers.AutoModelForCausalLM.from_pretrained(reference_dir, dtype=torch.float32)
    data = datasets.Dataset.from_dict({"prompt": ["a"], "chosen": ["b"], "rejected": ["c"]})
    config = DPOConfig(output_dir=tempfile.mkdtemp(), loss_type=[loss], beta=beta, report_to="none", use_cpu=True,
                       bf16=False, fp16=False)
    return DPOTrainer(model=model, ref_model=reference, args=config, train_dataset=data, processing_class=tokenizer)


def compare(args):
    torch.set_num_threads(1)
    failed = [run for loss, run in (case.split(":", 1) for case in args.case) if not compare_one(args, loss, run)]
    if failed:
        sys.exit(f"dpo_trl: xtrain differs from TRL by more than {args.tolerance} in {', '.join(failed)}")


def compare_one(args, loss_type, run):
    from safetensors.torch import load_file
    from trl.trainer.dpo_trainer import DataCollatorForPreference
    trainer = trainer_for(args.model, args.reference, loss_type, args.beta)
    examples = []
    with open(args.data, encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            examples.append({"prompt_ids": byte_ids(record["prompt"]),
                             "chosen_ids": byte_ids(record["chosen"]) + [EOS],
                             "rejected_ids": byte_ids(record["rejected"]) + [EOS]})
    collator = DataCollatorForPreference(pad_token_id=EOS, max_length=args.seq_len + 1)
    inputs = collator.torch_call(examples)
    model = trainer.model
    model.train()
    model.zero_grad()
    loss = trainer._compute_loss(model, inputs, return_outputs=False)
    loss.backward()
    metrics = {name: values[-1] for name, values in trainer._metrics["train"].items()}

    with open(os.path.join(run, "metrics.jsonl"), encoding="utf-8") as f:
        step = json.loads(f.readline())
    moments = load_file(os.path.join(run, "checkpoints", "step-1", "optimizer.safetensors"))
    # Differences relative to the larger of 1 and the figure's scale (the loss; a tensor's largest
    # gradient): ipo's loss of 25 is a float32 value whose rounding step is 1.9e-6.
    loss_diff = abs(step["loss"] - loss.item()) / max(1.0, abs(loss.item()))
    grad_diff, grad_abs, worst = 0.0, 0.0, ""
    for name, p in model.named_parameters():
        absolute = (moments["exp_avg." + name].double() - p.grad.double()).abs().max().item()
        diff = absolute / max(1.0, p.grad.abs().max().item())
        if diff >= grad_diff:
            grad_diff, grad_abs, worst = diff, absolute, name
    names = ["rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins", "logps/chosen",
             "logps/rejected"]
    # Relative to the larger of 1 and the figure: logps/* are sums of tens of float32 terms.
    metric_diff = max(abs(step[n] - metrics[n]) / max(1.0, abs(metrics[n])) for n in names)
    print(f"dpo {loss_type} beta {args.beta}: loss xtrain {step['loss']:.9f} TRL {loss.item():.9f} "
          f"(diff {loss_diff:.2e} relative); max gradient diff {grad_diff:.2e} relative ({grad_abs:.2e} absolute, {worst}); "
          f"max metric diff {metric_diff:.2e} relative "
          f"(margins {metrics['rewards/margins']:.6f}, accuracies {metrics['rewards/accuracies']:.2f})")
    return max(loss_diff, grad_diff, metric_diff) <= args.tolerance


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("--out", required=True)
    m.add_argument("--reference", required=True)
    m.add_argument("--data", required=True)
    c = sub.add_parser("compare")
    c.add_argument("--model", required=True)
    c.add_argument("--reference", required=True)
    c.add_argument("--data", required=True)
    c.add_argument("--seq-len", type=int, required=True)
    c.add_argument("--beta", type=float, required=True)
    c.add_argument("--case", action="append", required=True, help="LOSS:RUN, the loss (sigmoid, ipo) xtrain's RUN used")
    c.add_argument("--tolerance", type=float, default=1e-6)
    args = p.parse_args()
    make(args) if args.command == "make" else compare(args)


if __name__ == "__main__":
    main()
