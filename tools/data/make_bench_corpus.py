#!/usr/bin/env python3
"""Writes a large JSONL corpus of English-like text quickly, for data-loading benchmarks:

    make_bench_corpus.py OUT.jsonl SIZE_MB [--seed N] [--sample OUT.txt SAMPLE_BYTES]

Words come from a generated vocabulary of 8000 lowercase words drawn with a Zipf-like law, so a
BPE tokenizer trained on a sample compresses the text about as much as it would prose. Documents
of 200 to 6000 bytes are assembled from a pool of 50,000 generated sentences, which keeps the
writer at well over 100 MB/s. The output is a pure function of the seed and the size (Python's
random.Random is stable across versions for the calls used here). --sample also writes the
first SAMPLE_BYTES of text, to train a tokenizer on.
"""

import argparse
import itertools
import json
import random


def vocabulary(r, count):
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    weights = [12.7, 9.1, 8.2, 7.5, 7.0, 6.7, 6.3, 6.1, 6.0, 4.3, 4.0, 2.8, 2.8, 2.4, 2.4, 2.2, 2.0, 2.0, 1.9, 1.5,
               1.0, 0.8, 0.2, 0.2, 0.1, 0.1]
    words = set()
    while len(words) < count:
        words.add("".join(r.choices(letters, weights, k=r.randint(1, 10))))
    words = sorted(words)
    r.shuffle(words)
    return words


def sentences(r, words, count):
    cumulative = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(words))))
    pool = []
    for _ in range(count):
        chosen = r.choices(words, cum_weights=cumulative, k=r.randint(4, 24))
        chosen[0] = chosen[0].capitalize()
        pool.append(" ".join(chosen) + r.choice([".", ".", ".", "?", "!", ";", ","]))
    return pool


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("size_mb", type=float)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--sample", nargs=2, metavar=("OUT", "BYTES"))
    args = parser.parse_args()
    r = random.Random(args.seed)
    pool = sentences(r, vocabulary(r, 8000), 50_000)
    target = int(args.size_mb * 1_000_000)
    written = 0
    sample = [] if args.sample else None
    sample_bytes = int(args.sample[1]) if args.sample else 0
    with open(args.out, "w", encoding="utf-8") as out:
        while written < target:
            size = r.randint(200, 6000)
            parts, length = [], 0
            while length < size:
                sentence = pool[r.randrange(len(pool))]
                parts.append(sentence)
                length += len(sentence) + 1
            text = " ".join(parts)
            if sample is not None and sample_bytes > 0:
                sample.append(text[:sample_bytes])
                sample_bytes -= len(sample[-1])
            line = json.dumps({"text": text}) + "\n"
            out.write(line)
            written += len(line)
    if args.sample:
        with open(args.sample[0], "w", encoding="utf-8") as f:
            f.write("\n".join(sample))


if __name__ == "__main__":
    main()
