// The vocabulary holds the padding id and every id of the tokenizer (an image classifier's is
// its labels, which the data checks).
#include <fmt/format.h>

#include "config/recipe_rule.h"
#include "model/spec/model_spec.h"

namespace xtrain::config::rules {

void vocabulary(const RuleContext& c) {
  const auto& m = c.recipe.model;
  if (const auto* spec = model::find_model_spec(m.family);
      spec && spec->capabilities.pad_token && m.vocab_size > 0 && m.pad_token_id >= m.vocab_size)
    c.refuse("model.pad_token_id",
             fmt::format("{} is not an id of the vocabulary of {} (model.vocab_size){}", m.pad_token_id, m.vocab_size,
                         m.init_from.empty() ? "" : fmt::format("; it comes from {}/config.json",
                                                                m.init_from.substr(3))));
  const auto* spec = model::find_model_spec(m.family);
  if (spec && spec->capabilities.image_classes) return;  // its vocabulary is its labels, not token ids
  if (c.tokenizer_vocab > 0 && m.vocab_size < c.tokenizer_vocab)
    c.refuse("model.vocab_size", fmt::format("{} is smaller than the {} ids of tokenizer '{}'", m.vocab_size,
                                             c.tokenizer_vocab, c.recipe.data.tokenizer));
}

}  // namespace xtrain::config::rules
