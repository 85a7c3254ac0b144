#!/usr/bin/env python3
"""Scores a vision-language checkpoint on the synthetic shapes test set (make_vlm_demo.py): for
each test picture, `xtrain generate --chat --image PICTURE` answers "What is in the picture?"
greedily, and the answer is parsed as "a {colour} {shape} at the {position}". Prints the share
of right colours, shapes, positions and whole captions, and the same for the chance a guess
would have on this balanced set.

With --blank, every picture is replaced by the plain background (images/blank.png): a model
that reads the image can then do no better than chance, which shows that the captions come from
the pictures and not from the text.

Usage:
    score_vlm_demo.py --xtrain build/xtrain --checkpoint DIR --data data/vlm-demo [--blank] [--json OUT]
"""
import argparse
import json
import pathlib
import re
import subprocess

CAPTION = re.compile(r"^a (\w+) (\w+) at the (top left|top right|bottom left|bottom right)")
FIELDS = ("colour", "shape", "position")


def answer(xtrain, checkpoint, image):
    command = [xtrain, "generate", checkpoint, "--chat", "--prompt", "What is in the picture?",
               "--image", str(image), "--temperature", "0", "--max-new-tokens", "48"]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--xtrain", required=True)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--blank", action="store_true")
    p.add_argument("--json")
    args = p.parse_args()
    data = pathlib.Path(args.data)
    rows = [line.split("\t") for line in (data / "test.tsv").read_text().splitlines() if line]
    right = dict.fromkeys(FIELDS + ("caption",), 0)
    values = {field: set() for field in FIELDS}
    for path, *truth in rows:
        for field, value in zip(FIELDS, truth):
            values[field].add(value)
        image = data / "images" / "blank.png" if args.blank else data / path
        text = answer(args.xtrain, args.checkpoint, image)
        match = CAPTION.match(text)
        got = match.groups() if match else (None, None, None)
        for field, want, have in zip(FIELDS, truth, got):
            right[field] += want == have
        right["caption"] += tuple(truth) == got
    n = len(rows)
    accuracy = {field: count / n for field, count in right.items()}
    chance = {field: 1 / len(values[field]) for field in FIELDS}
    chance["caption"] = chance["colour"] * chance["shape"] * chance["position"]
    label = "blanked images" if args.blank else "test images"
    print(f"{label}: {n} pictures; accuracy " + ", ".join(f"{k} {v:.3f}" for k, v in accuracy.items()) +
          "; chance " + ", ".join(f"{k} {v:.3f}" for k, v in chance.items()))
    if args.json:
        with open(args.json, "a") as out:
            out.write(json.dumps({"images": label, "pictures": n, "accuracy": accuracy, "chance": chance}) + "\n")


if __name__ == "__main__":
    main()
