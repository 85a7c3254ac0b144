#!/usr/bin/env python3
"""T5's span corruption (the denoising objective), as transformers' Flax example
run_t5_mlm_flax.py computes it (DataCollatorForT5MLM, after the T5 codebase's
random_spans_noise_mask), in numpy: the reference for xtrain's data.objective span_corruption.

Usage:
    span_corruption.py --masks MASKS.safetensors --out OUT.safetensors --samples 10000
                       --noise-density 0.15 --mean-noise-span-length 3 --vocab-size V --eos-id E
                       [--pad-id 0] [--seed 0]

MASKS.safetensors holds xtrain's tokens and noise masks (integer [N, L], 1 at noise). The
reference's collator turns them into its input_ids, labels and decoder_input_ids (sentinels
vocab_size - 1, vocab_size - 2, ... as len(tokenizer) - k; EOS appended; the decoder's inputs
the labels shifted right behind pad_id), written to OUT. It also draws --samples masks of
length L with its own random_spans_noise_mask and writes their statistics beside xtrain's:
noise_density, mean_span_length (over all spans), span_lengths (a histogram of noise span
lengths, normalised) and position_rate (how often each position is noise), each as
reference.<name> and xtrain.<name>.
"""
import argparse

import numpy as np
import torch
from safetensors.torch import load_file, save_file


def random_spans_noise_mask(length, noise_density, mean_noise_span_length):
    """DataCollatorForT5MLM.random_spans_noise_mask, verbatim but for self."""
    orig_length = length
    num_noise_tokens = int(np.round(length * noise_density))
    num_nonnoise_tokens = length - num_noise_tokens
    num_noise_tokens = min(max(num_noise_tokens, 1), length - 1)
    num_noise_spans = int(np.round(min(num_noise_tokens, num_nonnoise_tokens) / mean_noise_span_length))
    num_noise_spans = max(num_noise_spans, 1)
    num_nonnoise_tokens = length - num_noise_tokens

    def _random_segmentation(num_items, num_segments):
        mask_indices = np.arange(num_items - 1) < (num_segments - 1)
        np.random.shuffle(mask_indices)
        first_in_segment = np.pad(mask_indices, [[1, 0]])
        segment_id = np.cumsum(first_in_segment)
        _, segment_length = np.unique(segment_id, return_counts=True)
        return segment_length

    noise_span_lengths = _random_segmentation(num_noise_tokens, num_noise_spans)
    nonnoise_span_lengths = _random_segmentation(num_nonnoise_tokens, num_noise_spans)
    interleaved_span_lengths = np.reshape(np.stack([nonnoise_span_lengths, noise_span_lengths], axis=1),
                                          [num_noise_spans * 2])
    span_starts = np.cumsum(interleaved_span_lengths)[:-1]
    span_start_indicator = np.zeros((length,), dtype=np.int8)
    span_start_indicator[span_starts] = True
    span_num = np.cumsum(span_start_indicator)
    is_noise = np.equal(span_num % 2, 1)
    return is_noise[:orig_length]


def create_sentinel_ids(mask_indices, vocab_size):
    """DataCollatorForT5MLM.create_sentinel_ids, len(self.tokenizer) being vocab_size."""
    start_indices = mask_indices - np.roll(mask_indices, 1, axis=-1) * mask_indices
    start_indices[:, 0] = mask_indices[:, 0]
    sentinel_ids = np.where(start_indices != 0, np.cumsum(start_indices, axis=-1), start_indices)
    sentinel_ids = np.where(sentinel_ids != 0, (vocab_size - sentinel_ids), 0)
    sentinel_ids -= mask_indices - start_indices
    return sentinel_ids


def filter_input_ids(input_ids, sentinel_ids, eos_id):
    """DataCollatorForT5MLM.filter_input_ids."""
    batch_size = input_ids.shape[0]
    input_ids_full = np.where(sentinel_ids != 0, sentinel_ids, input_ids)
    input_ids = input_ids_full[input_ids_full >= 0].reshape((batch_size, -1))
    return np.concatenate([input_ids, np.full((batch_size, 1), eos_id, dtype=input_ids.dtype)], axis=-1)


def shift_tokens_right(input_ids, pad_token_id, decoder_start_token_id):
    shifted = np.zeros_like(input_ids)
    shifted[:, 1:] = input_ids[:, :-1]
    shifted[:, 0] = decoder_start_token_id
    return np.where(shifted == -100, pad_token_id, shifted)


def statistics(masks):
    """Density, mean span length, the normalised histogram of span lengths (1 .. 32, longer in
    the last bin) and each position's noise rate, over boolean masks [N, L]."""
    masks = masks.astype(np.int64)
    starts = masks.copy()
    starts[:, 1:] = masks[:, 1:] * (1 - masks[:, :-1])
    lengths = []
    for row in masks:
        edges = np.diff(np.concatenate([[0], row, [0]]))
        lengths.extend((np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)).tolist())
    lengths = np.minimum(np.array(lengths), 32)
    histogram = np.bincount(lengths, minlength=33)[1:].astype(np.float64)
    return {"noise_density": np.array([masks.mean()]), "mean_span_length": np.array([masks.sum() / starts.sum()]),
            "span_lengths": histogram / histogram.sum(), "position_rate": masks.mean(axis=0).astype(np.float64)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--masks", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--samples", type=int, default=10000)
    p.add_argument("--noise-density", type=float, default=0.15)
    p.add_argument("--mean-noise-span-length", type=float, default=3.0)
    p.add_argument("--vocab-size", type=int, required=True)
    p.add_argument("--eos-id", type=int, required=True)
    p.add_argument("--pad-id", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    given = load_file(args.masks)
    tokens, masks = given["tokens"].numpy().astype(np.int64), given["masks"].numpy().astype(bool)
    input_ids = filter_input_ids(tokens, create_sentinel_ids(masks.astype(np.int8), args.vocab_size), args.eos_id)
    labels = filter_input_ids(tokens, create_sentinel_ids((~masks).astype(np.int8), args.vocab_size), args.eos_id)
    result = {"input_ids": input_ids, "labels": labels,
              "decoder_input_ids": shift_tokens_right(labels, args.pad_id, args.pad_id)}
    np.random.seed(args.seed)
    length = masks.shape[1]
    reference = np.stack([random_spans_noise_mask(length, args.noise_density, args.mean_noise_span_length)
                          for _ in range(args.samples)])
    for side, sample in (("reference", reference), ("xtrain", masks)):
        result.update({f"{side}.{k}": v for k, v in statistics(sample).items()})
    save_file({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in result.items()}, args.out)
    ref, ours = statistics(reference), statistics(masks)
    print(f"noise density: reference {ref['noise_density'][0]:.5f}, xtrain {ours['noise_density'][0]:.5f}; "
          f"mean span length: reference {ref['mean_span_length'][0]:.4f}, xtrain {ours['mean_span_length'][0]:.4f} "
          f"({args.samples} and {len(masks)} masks of {length} tokens)")


if __name__ == "__main__":
    main()
