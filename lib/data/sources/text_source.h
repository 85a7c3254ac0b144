// Sources: where a recipe's `data.train` / `data.eval` documents come from.
//   builtin:demo       the demo corpus embedded in the binary (all but its last 5%)
//   builtin:demo-eval  the last 5% of the demo corpus, held out for evaluation
//   megatron:PREFIX    a Megatron indexed dataset PREFIX.idx + PREFIX.bin, already tokenized
//                      (xtrain data prepare, or Megatron's preprocess_data.py), read in place
//   PATH.jsonl         one JSON object per line: {"text": ...} or a conversation
//                      {"messages": [{"role": ..., "content": ...}, ...]} (jsonl_record.h)
//   PATH (directory)   every regular file in it, sorted by name, each file one document
//   PATH (file)        plain UTF-8 text, one document
// A value may also be a weighted list of these (source_list.h).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "data/sources/document_reader.h"

namespace xtrain::data {

bool is_megatron_source(const std::string& spec);
// "megatron:PREFIX" -> "PREFIX".
std::string megatron_prefix(const std::string& spec);

// The inputs of a source other than megatron:, in document order.
std::vector<DocumentInput> document_inputs(const std::string& spec);

// Loads all documents of a plain text source. Problems (missing path, bad JSONL line, missing
// "text", a conversation record, a megatron: source) throw InputError naming the file and line.
std::vector<std::string> load_documents(const std::string& spec);

// Cheap check used by recipe validation: nullopt if the source (or every source of a list)
// exists, else the problem ("file not found: data/x.txt").
std::optional<std::string> check_source(const std::string& spec);

}  // namespace xtrain::data
