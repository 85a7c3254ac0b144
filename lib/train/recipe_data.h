// The datasets a recipe names (data.train, data.eval), loaded with its sequence length, seed and
// chat template, tokenizing on this rank's share of the cores. A problem is an InputError that
// names the recipe key and the source.
#pragma once
#include <memory>
#include <string>

#include "config/recipe.h"
#include "data/masked_lm_dataset.h"
#include "data/sample_dataset.h"
#include "data/span_corruption.h"
#include "text/tokenizer.h"

namespace xtrain::train {

// key: "data.train" or "data.eval"; source: its value. With data.objective mlm the samples are
// masked (data/masked_lm_dataset.h); with span_corruption, corrupted (data/span_corruption.h)
// from windows of its expanded length.
std::unique_ptr<data::SampleDataset> load_recipe_dataset(const std::string& key, const std::string& source,
                                                         const text::Tokenizer& tokenizer,
                                                         const config::Recipe& recipe, bool shuffle);

// The masking of data.objective mlm: the tokenizer's [CLS], [MASK] and other special ids (an
// InputError when it lacks [CLS] or [MASK], or when its [PAD] is not model.pad_token_id).
data::MaskedLmOptions masked_lm_options(const text::Tokenizer& tokenizer, const config::Recipe& recipe);
// The corruption of data.objective span_corruption: data.seq_len encoder tokens, the sentinels
// the model vocabulary's last ids (an InputError when the tokenizer's ids reach them), EOS the
// tokenizer's, the decoder's start model.pad_token_id.
data::SpanCorruptionOptions span_options(const text::Tokenizer& tokenizer, const config::Recipe& recipe);

}  // namespace xtrain::train
