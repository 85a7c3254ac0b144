"""Writes the seed corpus of every fuzz target (tests/fuzz/*.cpp) into OUT/<target>/: small,
valid inputs of each kind, made with the reference libraries (safetensors, tokenizers,
sentencepiece), so that the fuzzers start from files the engine really reads.

usage: make_seeds.py OUT REPO_ROOT   (run with the project's .venv Python)
"""
import base64
import ctypes
import io
import json
import os
import struct
import sys
import tempfile

import numpy as np
from safetensors.numpy import save
import sentencepiece as spm
from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers, normalizers, processors

TEXT = ("The quick brown fox jumps over the lazy dog. It's 2026: 12345 tokens!\n"
        "café naïve 東京 🙂 <|endoftext|> hello world\n") * 20


def write(out, target, name, data):
    os.makedirs(os.path.join(out, target), exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(os.path.join(out, target, name), mode) as f:
        f.write(data)


def recipe_seeds(out, root):
    for name in sorted(os.listdir(os.path.join(root, "recipes"))):
        with open(os.path.join(root, "recipes", name)) as f:
            write(out, "recipe", name, f.read())
    write(out, "recipe", "anchors.yaml",
          "base: &b {lr: 1.0e-3}\nname: x\noptim: *b\ntrain: {steps: 3, seq_len: 16}\n"
          "parallel: {fsdp: 2}\ndata:\n  tokenizer: byte\n  sources: [{path: a.jsonl, weight: 2}]\n")


def safetensors_seeds(out):
    write(out, "safetensors", "two.safetensors",
          save({"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([1, 0], dtype=np.bool_)},
               metadata={"format": "pt"}))
    write(out, "safetensors", "empty_and_bf16.safetensors",
          save({"e": np.zeros((0, 4), dtype=np.int64), "h": np.ones(3, dtype=np.float16)}))


def indexed_dataset_seed(out):
    # FuzzedDataProvider takes the .bin length from the input's last 2 bytes (little-endian), then the .bin, then
    # the .idx (tests/fuzz/indexed_dataset.cpp).
    sizes = [3, 1, 4]
    tokens = np.arange(sum(sizes), dtype=np.uint16).tobytes()
    pointers = np.cumsum([0] + sizes[:-1]) * 2
    idx = (b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(sizes), len(sizes) + 1)
           + np.array(sizes, dtype=np.int32).tobytes() + np.array(pointers, dtype=np.int64).tobytes()
           + np.arange(len(sizes) + 1, dtype=np.int64).tobytes())
    write(out, "indexed_dataset", "three_documents", tokens + idx + struct.pack("<H", len(tokens)))


def tokenizer_json_seeds(out):
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator([TEXT], trainer)
    write(out, "tokenizer_json", "byte_level.json", tokenizer.to_str())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.add_tokens(["hello world"])
    write(out, "tokenizer_json", "nfc_added.json", tokenizer.to_str())
    wordpiece = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wordpiece.normalizer = normalizers.BertNormalizer(lowercase=True)
    wordpiece.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wordpiece.decoder = decoders.WordPiece()
    wordpiece.train_from_iterator([TEXT], trainers.WordPieceTrainer(
        vocab_size=200, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    wordpiece.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    write(out, "tokenizer_json", "wordpiece.json", wordpiece.to_str())


def tiktoken_seed(out):
    ranks = [bytes([b]) for b in range(256)] + [b"th", b"the", b" the", b"er", b" quick"]
    write(out, "tiktoken", "ranks.tiktoken",
          "".join(f"{base64.b64encode(token).decode()} {rank}\n" for rank, token in enumerate(ranks)))


def sentencepiece_seeds(out):
    with tempfile.TemporaryDirectory() as work:
        with open(os.path.join(work, "text.txt"), "w") as f:
            f.write(TEXT)
        for model_type in ("unigram", "bpe"):
            prefix = os.path.join(work, model_type)
            spm.SentencePieceTrainer.train(
                input=f.name, model_prefix=prefix, vocab_size=54, model_type=model_type,
                normalization_rule_name="identity", character_coverage=1.0, minloglevel=2)
            with open(prefix + ".model", "rb") as model:
                write(out, "sentencepiece", model_type + ".model", model.read())


def chat_jsonl_seed(out):
    lines = [{"text": "plain text"},
             {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi 🙂"},
                           {"role": "assistant", "content": "Hello."}]},
             {"messages": [{"role": "user", "content": ""}], "id": 7}]
    write(out, "chat_jsonl", "records.jsonl", "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines) + "\n")


def manifest_seed(out):
    # The manifest xtrain writes for the model file the target puts beside it (manifest.cpp).
    header = (b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
              b'"b":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}}')
    data = b"\x00\x00\x80\x3f\x00\x00\x00\x40\x01\x02\x03\x04"
    model = struct.pack("<Q", len(header)) + header + data
    xxh3 = ctypes.CDLL("libxxhash.so.0").XXH3_64bits
    xxh3.restype, xxh3.argtypes = ctypes.c_uint64, [ctypes.c_char_p, ctypes.c_size_t]
    digest = lambda b: "%016x" % xxh3(b, len(b))
    start = 8 + len(header)
    manifest = {"format": 1, "checksum": "xxh3-64", "files": {"model.safetensors": {
        "size": len(model), "xxh3": digest(model), "header_xxh3": digest(model[:start]),
        "tensors": {"a": digest(model[start:start + 8]), "b": digest(model[start + 8:])}}}}
    write(out, "manifest", "manifest.json", json.dumps(manifest, indent=1) + "\n")


def main():
    out, root = sys.argv[1], sys.argv[2]
    recipe_seeds(out, root)
    safetensors_seeds(out)
    indexed_dataset_seed(out)
    tokenizer_json_seeds(out)
    tiktoken_seed(out)
    sentencepiece_seeds(out)
    chat_jsonl_seed(out)
    manifest_seed(out)


if __name__ == "__main__":
    main()
