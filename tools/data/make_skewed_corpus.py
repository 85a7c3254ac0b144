"""Writes JSONL documents whose lengths follow a log-normal distribution: most are short, a few
fill whole sequences (the shape of web text). A pure function of the arguments.

usage: make_skewed_corpus.py OUT.jsonl TOTAL_BYTES [--median N] [--sigma S] [--max N] [--seed N]
"""
import argparse
import json
import math
import random

WORDS = "the of and a to in is was for on that with as by at from his her it an were are which".split()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("total_bytes", type=int)
    parser.add_argument("--median", type=float, default=150)
    parser.add_argument("--sigma", type=float, default=1.3)
    parser.add_argument("--max", type=int, default=8000)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    r = random.Random(args.seed)
    written = 0
    with open(args.out, "w") as out:
        while written < args.total_bytes:
            length = min(int(math.exp(r.gauss(math.log(args.median), args.sigma))) + 1, args.max)
            text = ""
            while len(text) < length:
                text += r.choice(WORDS) + " "
            out.write(json.dumps({"text": text[:length]}) + "\n")
            written += length + 1


if __name__ == "__main__":
    main()
