#include "data/cached_token_stream.h"

#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "data/cache_key.h"
#include "data/data_prepare.h"
#include "data/encoding_pipeline.h"
#include "data/indexed_token_stream.h"
#include "data/sources/text_source.h"
#include "data/token_cache.h"

namespace xtrain::data {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

std::shared_ptr<const TokenStream> load_cached_token_stream(const std::string& source,
                                                            const text::Tokenizer& tokenizer,
                                                            const DatasetOptions& options) {
  const auto started = Clock::now();
  const TokenCache cache(options.cache_dir);
  CacheKeyInputs inputs;
  inputs.files = fingerprint_source(source);
  inputs.tokenizer =
      tokenizer_fingerprint(options.tokenizer_spec.empty() ? tokenizer.name() : options.tokenizer_spec, tokenizer);
  inputs.chat_template = options.chat_template;
  inputs.objective = options.objective;
  inputs.seq_len = options.seq_len;
  const std::string key = cache_key(inputs);
  nlohmann::json sources = nlohmann::json::array();
  for (const auto& file : inputs.files) sources.push_back(file.path);
  const nlohmann::json info = {{"key_inputs", key_inputs_json(inputs)}, {"sources", sources}};

  auto build = [&](const std::string& prefix) {
    const auto build_started = Clock::now();
    fmt::print("data cache: tokenizing {} into {} on {} threads\n", source, cache.entry_dir(key), resolve_workers(0));
    std::fflush(stdout);
    DocumentReader reader(document_inputs(source));
    const DocumentEncoder encoder(tokenizer, text::ChatTemplate::parse(options.chat_template));
    // The node's other ranks wait for this entry, so its tokenizing takes every core.
    const PrepareResult result = write_indexed_dataset(reader, RecordForm::Any, encoder, resolve_workers(0), prefix,
                                                       token_dtype_for_vocab(tokenizer.vocab_size()));
    return nlohmann::json{{"documents", result.documents},
                          {"tokens", result.tokens},
                          {"source_bytes", result.bytes},
                          {"build_seconds", seconds_since(build_started)}};
  };
  const TokenCache::Opened opened = cache.open(key, info, build);
  auto stream = std::make_shared<IndexedTokenStream>(opened.prefix, tokenizer.vocab_size());
  fmt::print("data cache: {} {} ({} tokens) in {:.2f} s{}\n", source,
             opened.how == TokenCache::Opened::How::built ? "tokenized into " + opened.dir : "read from " + opened.dir,
             stream->size(), seconds_since(started), opened.waited ? ", after waiting for another process" : "");
  return stream;
}

}  // namespace xtrain::data
