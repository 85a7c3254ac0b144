#!/usr/bin/env python3
"""Trains small WordPiece tokenizers (BERT's kind) on a text with Python's tokenizers and writes
them as Hugging Face tokenizer.json files, for the WordPiece parity tests:

    train_hf_wordpiece.py TEXT OUT_DIR [VOCAB_SIZE]

    uncased.json   BertNormalizer(lowercase, accents stripped), as bert-base-uncased
    cased.json     BertNormalizer(no lowercasing, accents kept), as bert-base-cased

Both have BertPreTokenizer, the special tokens [PAD] [UNK] [CLS] [SEP] [MASK] (ids 0-4), the
post-processor TemplateProcessing("[CLS] $A [SEP]", "[CLS] $A [SEP] $B:1 [SEP]:1") and the
WordPiece decoder, as BertWordPieceTokenizer builds them. The alphabet is limited to the 400
most frequent characters, so that rarer ones leave their words unknown ([UNK]).
"""

import os
import sys

from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import WordPiece
from tokenizers.trainers import WordPieceTrainer

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
STYLES = {"uncased": True, "cased": False}


def train(text, lowercase, vocab_size):
    tokenizer = Tokenizer(WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    # strip_accents=None follows lowercase, as in BERT's own files.
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = WordPieceTrainer(
        vocab_size=vocab_size, min_frequency=2, special_tokens=SPECIAL, limit_alphabet=400,
        continuing_subword_prefix="##", show_progress=False,
    )
    tokenizer.train_from_iterator([text], trainer)
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    return tokenizer


def main() -> int:
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    text_path, out_dir = sys.argv[1:3]
    vocab_size = int(sys.argv[3]) if len(sys.argv) == 4 else 1500
    with open(text_path, encoding="utf-8", newline="") as f:
        text = f.read()
    os.makedirs(out_dir, exist_ok=True)
    for name, lowercase in STYLES.items():
        tokenizer = train(text, lowercase, vocab_size)
        path = os.path.join(out_dir, f"{name}.json")
        tokenizer.save(path)
        Tokenizer.from_file(path)  # the library reads back what it wrote
        print(f"{path}: {tokenizer.get_vocab_size()} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
