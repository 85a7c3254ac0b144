#include "data/dataset_loader.h"

#include "data/blended_dataset.h"
#include "data/cache_key.h"
#include "data/cached_token_stream.h"
#include "data/encoding_pipeline.h"
#include "data/indexed_token_stream.h"
#include "data/sources/source_list.h"
#include "data/sources/text_source.h"
#include "data/token_dataset.h"
#include "util/input_error.h"

namespace xtrain::data {

std::shared_ptr<const TokenStream> load_token_stream(const std::string& source, const text::Tokenizer& tokenizer,
                                                     const DatasetOptions& options) {
  if (auto problem = check_source(source)) throw InputError(*problem);
  if (is_megatron_source(source))
    return std::make_shared<IndexedTokenStream>(megatron_prefix(source), tokenizer.vocab_size());
  if (!options.cache_dir.empty() && is_cacheable_source(source))
    return load_cached_token_stream(source, tokenizer, options);
  DocumentReader reader(document_inputs(source));
  const DocumentEncoder encoder(tokenizer, text::ChatTemplate::parse(options.chat_template));
  auto stream = std::make_shared<InMemoryTokenStream>();
  encode_documents(reader, RecordForm::Any, encoder, options.workers, [&](EncodedChunk&& chunk) {
    for (const auto& document : chunk.documents) stream->append(document);
  });
  return stream;
}

std::unique_ptr<SampleDataset> load_dataset(const std::string& spec, const text::Tokenizer& tokenizer,
                                            const DatasetOptions& options) {
  const std::vector<WeightedSource> sources = parse_source_list(spec);
  std::vector<std::unique_ptr<TokenDataset>> datasets;
  std::vector<double> weights;
  for (size_t i = 0; i < sources.size(); ++i) {
    // Each source its own sample order, so that two sources of equal size are not shuffled alike.
    const uint64_t seed = options.seed + i;
    try {
      datasets.push_back(std::make_unique<TokenDataset>(load_token_stream(sources[i].path, tokenizer, options),
                                                        options.seq_len, seed, options.shuffle));
    } catch (const InputError& e) {
      if (sources.size() == 1) throw;
      throw InputError("source " + std::to_string(i + 1) + " (" + sources[i].path + "): " + e.what());
    }
    weights.push_back(sources[i].weight);
  }
  if (!is_source_list(spec)) return std::move(datasets.front());
  return std::make_unique<BlendedDataset>(std::move(datasets), std::move(weights));
}

}  // namespace xtrain::data
