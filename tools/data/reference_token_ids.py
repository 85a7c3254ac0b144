#!/usr/bin/env python3
"""Writes the token ids that a reference implementation gives for a text file, space-separated
on one line, for comparison with `xtrain tokenize`:

    reference_token_ids.py tiktoken ENCODING RANK_FILE TEXT OUT   (tiktoken)
    reference_token_ids.py hf TOKENIZER_JSON TEXT OUT             (Hugging Face tokenizers)
    reference_token_ids.py sentencepiece MODEL TEXT OUT           (sentencepiece)

tiktoken: the encoding (gpt2, cl100k_base or o200k_base) is built offline from a local rank
file with the split pattern and special tokens that tiktoken publishes for it
(tiktoken_ext/openai_public.py), and the ids are encode_ordinary's (special-token text is
ordinary text). tokenizers: encode(text, add_special_tokens=False), so added tokens in the text
are recognised and the post-processor adds nothing. sentencepiece: encode(text).

The text is read as UTF-8 with line ends kept as they are (\\r\\n stays \\r\\n).
"""

import os
import sys

# From tiktoken_ext/openai_public.py (tiktoken 0.14).
R50K_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|"""
    r"""\s*[\r\n]|\s+(?!\S)|\s"""
)
O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
ENDOFTEXT = "<|endoftext|>"
ENDOFPROMPT = "<|endofprompt|>"
TIKTOKEN_ENCODINGS = {
    "gpt2": dict(pat_str=R50K_PATTERN, special_tokens={ENDOFTEXT: 50256}, explicit_n_vocab=50257),
    "cl100k_base": dict(
        pat_str=CL100K_PATTERN,
        special_tokens={
            ENDOFTEXT: 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            ENDOFPROMPT: 100276,
        },
    ),
    "o200k_base": dict(pat_str=O200K_PATTERN, special_tokens={ENDOFTEXT: 199999, ENDOFPROMPT: 200018}),
}

USAGE = __doc__.split("\n\n")[1]


def read_text(path):
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def tiktoken_ids(encoding_name, rank_file, text):
    if encoding_name not in TIKTOKEN_ENCODINGS:
        raise SystemExit(f"unknown tiktoken encoding '{encoding_name}' (known: {', '.join(TIKTOKEN_ENCODINGS)})")
    os.environ["TIKTOKEN_CACHE_DIR"] = ""  # read the local file as it is; write no cache
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    encoding = tiktoken.Encoding(
        name=encoding_name, mergeable_ranks=load_tiktoken_bpe(rank_file), **TIKTOKEN_ENCODINGS[encoding_name]
    )
    return encoding.encode_ordinary(text)


def hf_ids(tokenizer_json, text):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(tokenizer_json).encode(text, add_special_tokens=False).ids


def sentencepiece_ids(model, text):
    import sentencepiece

    return sentencepiece.SentencePieceProcessor(model_file=model).encode(text)


def main() -> int:
    args = sys.argv[1:]
    kinds = {"tiktoken": 4, "hf": 3, "sentencepiece": 3}
    if not args or kinds.get(args[0]) != len(args) - 1:
        print(USAGE, file=sys.stderr)
        return 2
    kind, out_path = args[0], args[-1]
    text = read_text(args[-2])
    if kind == "tiktoken":
        ids = tiktoken_ids(args[1], args[2], text)
    elif kind == "hf":
        ids = hf_ids(args[1], text)
    else:
        ids = sentencepiece_ids(args[1], text)
    with open(out_path, "w", encoding="ascii") as f:
        f.write(" ".join(map(str, ids)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
