// prepare_indexed_dataset (`xtrain data prepare`): tokenizes text or JSONL files into a
// Megatron indexed dataset PREFIX.idx + PREFIX.bin that a recipe reads as megatron:PREFIX.
// Every document ends with the tokenizer's EOS id, as the token stream of the same files read
// directly would (Megatron's --append-eod). Ids are uint16 below 65500 ids, else int32, as
// Megatron's preprocess_data.py picks. When conversations are among the documents, the loss
// mask goes to PREFIX.loss_mask.idx + .bin (uint8, 1 = target).
// Documents are parsed and encoded on `workers` threads and written in input order, so the
// files are byte-identical for any number of workers.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/document_encoder.h"
#include "data/sources/document_reader.h"
#include "data/sources/indexed_dataset_format.h"

namespace xtrain::util {
class ProgressLine;
}

namespace xtrain::data {

struct PrepareOptions {
  std::string tokenizer;  // a data.tokenizer spec
  std::vector<std::string> inputs;
  std::string output_prefix;
  int workers = 0;  // 0: one per core
  // auto: a .jsonl file holds records of either form, any other file is one document;
  // text: every file is one document; jsonl: records {"text": ...}; chat: records {"messages": ...}.
  std::string format = "auto";
  std::string chat_template = "chatml";
};

struct PrepareResult {
  int64_t documents = 0;
  int64_t tokens = 0;
  uint64_t bytes = 0;  // of input
  double seconds = 0;
  IndexedDType dtype = IndexedDType::UInt16;
  bool loss_mask = false;
  int workers = 0;
};

// Bad input (unreadable files, bad records, an unknown tokenizer) is an InputError; on any
// error no output file is left behind. progress may be null.
PrepareResult prepare_indexed_dataset(const PrepareOptions& options, util::ProgressLine* progress);

// The encoding and writing of prepare_indexed_dataset, for any documents: every document of
// reader goes to the indexed dataset at prefix, and its loss mask to PREFIX.loss_mask when a
// conversation comes (a stale one is removed otherwise). on_chunk, when set, sees the counts
// after each chunk (tokens included). Sets documents, tokens, bytes, dtype and loss_mask.
PrepareResult write_indexed_dataset(DocumentReader& reader, RecordForm form, const DocumentEncoder& encoder,
                                    int workers, const std::string& prefix, IndexedDType dtype,
                                    const std::function<void(const PrepareResult&)>& on_chunk = {});

}  // namespace xtrain::data
