// load_dataset: the dataset of a data.train / data.eval value. A megatron: source is read in
// place; any other source is tokenized when this is called, on `workers` threads, into memory.
// A list of sources becomes a BlendedDataset, one source a TokenDataset. Problems (missing
// files, bad records, too little data) are InputErrors naming the source.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "data/sample_dataset.h"
#include "data/token_stream.h"
#include "text/tokenizer.h"

namespace xtrain::data {

struct DatasetOptions {
  int64_t seq_len = 0;
  uint64_t seed = 0;
  bool shuffle = true;
  std::string chat_template = "chatml";  // renders conversation records (chat_template.h)
  int workers = 0;                       // tokenizing threads; 0: one per core
  // Non-empty: text sources are read through this data cache (cached_token_stream.h); the
  // tokenizer spec, objective and seq_len are part of its keys.
  std::string cache_dir;
  std::string tokenizer_spec;
  std::string objective = "clm";
};

std::unique_ptr<SampleDataset> load_dataset(const std::string& spec, const text::Tokenizer& tokenizer,
                                            const DatasetOptions& options);

// The token stream of one source (not a list).
std::shared_ptr<const TokenStream> load_token_stream(const std::string& source, const text::Tokenizer& tokenizer,
                                                     const DatasetOptions& options);

}  // namespace xtrain::data
