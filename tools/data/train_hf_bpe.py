#!/usr/bin/env python3
"""Trains small byte-level BPE tokenizers on a text and writes them as Hugging Face
tokenizer.json files, one per pre-tokenizer style, for the tokenizer parity tests:

    train_hf_bpe.py TEXT OUT_DIR [MERGES]

    gpt2.json     ByteLevel(use_regex) pre-tokenizer, merges written as "a b" strings
    llama3.json   Split(GPT-4 regex) + ByteLevel(use_regex=false), ignore_merges
    qwen2.json    NFC normalizer, Split(Qwen2 regex) + ByteLevel, a normalized added word
    mixed.json    Digits, literal and regex Splits with every behavior, add_prefix_space

Each has special tokens (<|endoftext|>, <|im_start|>, <|im_end|>, <mask> with lstrip and
rstrip). The normalizer and pre-tokenizer are the library's own (Python package tokenizers);
the merges come from a plain trainer that is a pure function of the text: start from the 256
byte-level symbols, repeatedly merge the most frequent adjacent pair (ties broken by the
pair's spelling; a pair seen once is never merged) over the pre-tokenized words. Each file is
loaded and saved by the library itself, so it is in the library's own format.
"""

import heapq
import json
import os
import sys

from tokenizers import Tokenizer
from tokenizers.pre_tokenizers import ByteLevel

GPT4_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
    r"\s+(?!\S)|\s+"
)
QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
    r"\s+(?!\S)|\s+"
)


def byte_level(add_prefix_space, use_regex):
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space, "trim_offsets": True, "use_regex": use_regex}


def split(pattern, behavior, invert=False):
    return {"type": "Split", "pattern": pattern, "behavior": behavior, "invert": invert}


STYLES = {
    "gpt2": {"pre_tokenizer": byte_level(False, True), "normalizer": None, "string_merges": True},
    "llama3": {
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [split({"Regex": GPT4_PATTERN}, "Isolated"), byte_level(False, False)],
        },
        "normalizer": None,
        "ignore_merges": True,
    },
    "qwen2": {
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [split({"Regex": QWEN2_PATTERN}, "Isolated"), byte_level(False, False)],
        },
        "normalizer": {"type": "NFC"},
        "added_words": ["cafe\u0301 au lait"],
    },
    "mixed": {
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Digits", "individual_digits": False},
                split({"String": ", "}, "MergedWithNext"),
                split({"Regex": "[-=(]"}, "MergedWithNext"),
                split({"Regex": "[.!?]"}, "MergedWithPrevious"),
                split({"Regex": "[^\\n]+"}, "Contiguous", True),
                split({"Regex": "\\t"}, "Removed"),
                byte_level(True, True),
            ],
        },
        "normalizer": None,
    },
}

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def empty_tokenizer_json(style):
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": style["normalizer"],
        "pre_tokenizer": style["pre_tokenizer"],
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": bool(style.get("ignore_merges")),
            "vocab": {},
            "merges": [],
        },
    }


def word_pairs(symbols):
    return zip(symbols, symbols[1:])


def train(style, text, merge_count):
    probe = Tokenizer.from_str(json.dumps(empty_tokenizer_json(style)))
    normalized = probe.normalizer.normalize_str(text) if probe.normalizer is not None else text
    counts = {}
    for piece, _ in probe.pre_tokenizer.pre_tokenize_str(normalized):
        counts[piece] = counts.get(piece, 0) + 1
    words = [list(piece) for piece in counts]
    word_counts = list(counts.values())

    vocab = {}
    for symbol in sorted(ByteLevel.alphabet()):
        vocab[symbol] = len(vocab)

    # Pair counts over all words, the words each pair may occur in, and a max-heap of
    # (count, spelling) with stale entries skipped when popped.
    pair_counts = {}
    pair_words = {}
    for index, symbols in enumerate(words):
        for pair in word_pairs(symbols):
            pair_counts[pair] = pair_counts.get(pair, 0) + word_counts[index]
            pair_words.setdefault(pair, set()).add(index)
    heap = [(-count, pair) for pair, count in pair_counts.items()]
    heapq.heapify(heap)

    merges = []
    while len(merges) < merge_count:
        best = None
        while heap:
            negative_count, pair = heap[0]
            if pair_counts.get(pair, 0) == -negative_count:
                best = pair
                break
            heapq.heappop(heap)
        if best is None or pair_counts[best] <= 1:
            break
        left, right = best
        merged = left + right
        if merged not in vocab:
            vocab[merged] = len(vocab)
        merges.append([left, right])
        changed = set()
        for index in pair_words.pop(best):
            symbols = words[index]
            out = []
            i = 0
            while i < len(symbols):
                if i + 1 < len(symbols) and symbols[i] == left and symbols[i + 1] == right:
                    out.append(merged)
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            if len(out) == len(symbols):
                continue
            count = word_counts[index]
            for pair in word_pairs(symbols):
                pair_counts[pair] -= count
                changed.add(pair)
            for pair in word_pairs(out):
                pair_counts[pair] = pair_counts.get(pair, 0) + count
                pair_words.setdefault(pair, set()).add(index)
                changed.add(pair)
            words[index] = out
        for pair in changed:
            count = pair_counts[pair]
            if count <= 0:
                del pair_counts[pair]
            else:
                heapq.heappush(heap, (-count, pair))
    return vocab, merges


def main() -> int:
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    text_path, out_dir = sys.argv[1:3]
    merge_count = int(sys.argv[3]) if len(sys.argv) == 4 else 1000
    with open(text_path, encoding="utf-8", newline="") as f:  # keep \r\n as is
        text = f.read()

    os.makedirs(out_dir, exist_ok=True)
    for name, style in STYLES.items():
        tokenizer_json = empty_tokenizer_json(style)
        vocab, merges = train(style, text, merge_count)
        tokenizer_json["model"]["vocab"] = vocab
        tokenizer_json["model"]["merges"] = merges
        added_tokens = tokenizer_json["added_tokens"]

        def add(content, special, **extra):
            added_tokens.append({"id": len(vocab) + len(added_tokens), "content": content, "single_word": False,
                                 "lstrip": False, "rstrip": False, "normalized": not special, "special": special,
                                 **extra})

        for content in SPECIAL:
            add(content, True)
        add("<mask>", True, lstrip=True, rstrip=True)
        for content in style.get("added_words", []):
            add(content, False)

        path = os.path.join(out_dir, f"{name}.json")
        Tokenizer.from_str(json.dumps(tokenizer_json)).save(path)
        if style.get("string_merges"):
            with open(path, encoding="utf-8") as f:
                saved = json.load(f)
            saved["model"]["merges"] = [" ".join(pair) if isinstance(pair, list) else pair
                                        for pair in saved["model"]["merges"]]
            with open(path, "w", encoding="utf-8") as f:
                json.dump(saved, f, ensure_ascii=False)
            Tokenizer.from_file(path)  # the library accepts the string form too
        print(f"{path}: {len(vocab)} tokens, {len(merges)} merges, {len(added_tokens)} added")
    return 0


if __name__ == "__main__":
    sys.exit(main())
