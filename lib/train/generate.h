// Text generation from a trained model: temperature and top-k sampling, or greedy decoding
// at temperature 0. Where the model reads a key/value cache (model/attention/kv_cache.h) and
// prompt plus new tokens fit in max_seq_len, each step runs the new token only; otherwise each
// runs a full forward over the context cropped to the model's max_seq_len. A vision-language
// model's prompt carries its images' pixel values, which every forward reads.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "model/causal_lm.h"
#include "text/tokenizer.h"

namespace xtrain::train {

struct GenerateOptions {
  int64_t max_new_tokens = 200;
  double temperature = 0.8;
  int64_t top_k = 40;  // 0: no top-k filtering
  uint64_t seed = 0;
  bool stop_at_eos = true;
  std::string stop;  // when not empty, generation ends where the text first contains it (not returned)
};

struct GeneratePrompt {
  std::vector<int64_t> ids;    // image placeholders already expanded
  torch::Tensor pixel_values;  // float32 [images, channels, height, width], or undefined
};

// Returns the generated continuation (without the prompt). on_text, if set, receives each
// piece of text as soon as it decodes, for streaming output.
std::string generate(model::CausalLM& model, const text::Tokenizer& tokenizer,
                     const std::string& prompt, const GenerateOptions& options,
                     const std::function<void(const std::string&)>& on_text = {});
std::string generate(model::CausalLM& model, const text::Tokenizer& tokenizer, const GeneratePrompt& prompt,
                     const GenerateOptions& options, const std::function<void(const std::string&)>& on_text = {});

}  // namespace xtrain::train
