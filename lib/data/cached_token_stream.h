// The token stream of a text source read through data.cache_dir: the source and tokenizer are
// fingerprinted (cache_key.h), and the entry of that key (token_cache.h) is read in place,
// memory-mapped, as an indexed dataset (indexed_token_stream.h). A missing or damaged entry is
// tokenized first, as xtrain data prepare writes one, by one process of the node while the
// others wait. Its ids, loss mask and document starts are those the source tokenized in memory
// has, so a run trains on the same samples, bit for bit, with or without the cache.
#pragma once
#include <memory>
#include <string>

#include "data/dataset_loader.h"
#include "data/token_stream.h"
#include "text/tokenizer.h"

namespace xtrain::data {

// source: one cacheable source (cache_key.h: is_cacheable_source); options.cache_dir is set.
std::shared_ptr<const TokenStream> load_cached_token_stream(const std::string& source,
                                                            const text::Tokenizer& tokenizer,
                                                            const DatasetOptions& options);

}  // namespace xtrain::data
