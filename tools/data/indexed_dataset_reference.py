#!/usr/bin/env python3
"""A reference for xtrain's Megatron indexed datasets, written independently with numpy.

    write  tokenizes files as `xtrain data prepare` does and writes PREFIX.idx + PREFIX.bin the
           way Megatron-LM's IndexedDatasetBuilder (megatron/core/datasets/indexed_dataset.py)
           does: one add_document per document, then finalize. With --workers N it encodes in a
           multiprocessing Pool of N processes, as Megatron's tools/preprocess_data.py does.
    check  reads PREFIX.idx + PREFIX.bin as Megatron's _IndexReader does and checks
           IndexedDataset's assertions; prints the counts.

Documents: a .jsonl file holds one {"text": ...} record per line (blank lines are skipped);
any other file is one document. Every document is followed by the tokenizer's EOS id, an
empty one too (Megatron's preprocess_data.py --append-eod skips empty documents instead).
Tokenizers: byte (UTF-8 bytes, EOS 256) or sentencepiece:MODEL (EOS: the model's </s>).

    python3 tools/data/indexed_dataset_reference.py write --tokenizer byte --output out/ref a.jsonl
    python3 tools/data/indexed_dataset_reference.py check out/ref
"""

import argparse
import json
import multiprocessing
import struct
import sys
import time

import numpy

HEADER = b"MMIDIDX\x00\x00"
CODES = {numpy.uint8: 1, numpy.int8: 2, numpy.int16: 3, numpy.int32: 4, numpy.int64: 5, numpy.float64: 6,
         numpy.float32: 7, numpy.uint16: 8}
DTYPES = {code: dtype for dtype, code in CODES.items()}

_tokenizer = None


class ByteTokenizer:
    vocab_size = 257
    eos = 256

    def encode(self, text: str):
        return list(text.encode("utf-8", "surrogateescape"))


class SentencePieceTokenizer:
    def __init__(self, path: str):
        import sentencepiece
        self.processor = sentencepiece.SentencePieceProcessor(model_file=path)
        self.vocab_size = self.processor.get_piece_size()
        self.eos = self.processor.eos_id()

    def encode(self, text: str):
        return self.processor.encode(text)


def make_tokenizer(spec: str):
    if spec == "byte":
        return ByteTokenizer()
    if spec.startswith("sentencepiece:"):
        return SentencePieceTokenizer(spec[len("sentencepiece:"):])
    raise SystemExit(f"unknown tokenizer {spec!r} (byte or sentencepiece:MODEL)")


def init_worker(spec: str):
    global _tokenizer
    _tokenizer = make_tokenizer(spec)


def encode_document(document: bytes):
    """A JSONL line (bytes, starting with b"{") or a whole text document (a str)."""
    text = document if isinstance(document, str) else json.loads(document)["text"]
    return _tokenizer.encode(text) + [_tokenizer.eos]


def documents(paths):
    for path in paths:
        with open(path, "rb") as f:
            if not path.endswith(".jsonl"):
                yield f.read().decode("utf-8", "surrogateescape")
                continue
            for line in f:  # split at b"\n" only, as xtrain does
                if line.strip(b" \t\r\n"):
                    yield line


def optimal_dtype(vocab_size: int):
    """Megatron's DType.optimal_dtype."""
    return numpy.uint16 if vocab_size < 65500 else numpy.int32


def write(args) -> int:
    started = time.time()
    init_worker(args.tokenizer)
    dtype = optimal_dtype(_tokenizer.vocab_size)
    sequence_lengths = []
    document_indices = [0]
    with open(args.output + ".bin", "wb") as data_file:
        if args.workers > 0:
            pool = multiprocessing.Pool(args.workers, initializer=init_worker, initargs=(args.tokenizer,))
            encoded = pool.imap(encode_document, documents(args.inputs), 32)
        else:
            pool = None
            encoded = map(encode_document, documents(args.inputs))
        for ids in encoded:  # IndexedDatasetBuilder.add_document with one sequence
            array = numpy.array(ids, dtype=dtype)
            data_file.write(array.tobytes(order="C"))
            sequence_lengths.append(array.size)
            document_indices.append(len(sequence_lengths))
        if pool:
            pool.close()
            pool.join()
    item = numpy.dtype(dtype).itemsize
    pointers = numpy.concatenate([[0], numpy.cumsum(numpy.array(sequence_lengths, dtype=numpy.int64) * item)[:-1]])
    with open(args.output + ".idx", "wb") as index:  # _IndexWriter
        index.write(HEADER)
        index.write(struct.pack("<Q", 1))
        index.write(struct.pack("<B", CODES[dtype]))
        index.write(struct.pack("<Q", len(sequence_lengths)))
        index.write(struct.pack("<Q", len(document_indices)))
        index.write(numpy.array(sequence_lengths, dtype=numpy.int32).tobytes(order="C"))
        index.write(numpy.array(pointers if sequence_lengths else [], dtype=numpy.int64).tobytes(order="C"))
        index.write(numpy.array(document_indices, dtype=numpy.int64).tobytes(order="C"))
    seconds = time.time() - started
    tokens = int(sum(sequence_lengths))
    print(f"wrote {args.output}: {len(sequence_lengths)} documents, {tokens} tokens in {seconds:.2f} s "
          f"({tokens / seconds / 1e6:.3f} M tokens/s, {args.workers} workers)")
    return 0


def check(args) -> int:
    with open(args.prefix + ".idx", "rb") as stream:  # _IndexReader
        assert stream.read(9) == HEADER, "bad header"
        assert struct.unpack("<Q", stream.read(8))[0] == 1, "bad version"
        dtype = DTYPES[struct.unpack("<B", stream.read(1))[0]]
        sequence_count = struct.unpack("<Q", stream.read(8))[0]
        document_count = struct.unpack("<Q", stream.read(8))[0]
        offset = stream.tell()
    buffer = numpy.memmap(args.prefix + ".idx", mode="r", order="C")
    lengths = numpy.frombuffer(buffer, dtype=numpy.int32, count=sequence_count, offset=offset)
    pointers = numpy.frombuffer(buffer, dtype=numpy.int64, count=sequence_count, offset=offset + lengths.nbytes)
    document_indices = numpy.frombuffer(buffer, dtype=numpy.int64, count=document_count,
                                        offset=offset + lengths.nbytes + pointers.nbytes)
    # IndexedDataset.__init__'s assertions, and the .bin holding every sequence.
    assert lengths.shape[0] == document_indices[-1] == sequence_count
    data = numpy.memmap(args.prefix + ".bin", mode="r", dtype=dtype)
    item = numpy.dtype(dtype).itemsize
    assert sequence_count == 0 or pointers[-1] // item + lengths[-1] == data.shape[0], "the .bin does not match"
    print(f"{args.prefix}: {document_count - 1} documents, {int(lengths.sum())} tokens, {numpy.dtype(dtype).name}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    write_parser = commands.add_parser("write")
    write_parser.add_argument("--tokenizer", required=True)
    write_parser.add_argument("--output", required=True)
    write_parser.add_argument("--workers", type=int, default=0, help="processes of a Pool; 0 encodes in this one")
    write_parser.add_argument("inputs", nargs="+")
    check_parser = commands.add_parser("check")
    check_parser.add_argument("prefix")
    args = parser.parse_args()
    return write(args) if args.command == "write" else check(args)


if __name__ == "__main__":
    sys.exit(main())
