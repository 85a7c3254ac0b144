#include "train/generate.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <utility>

#include <torch/torch.h>

#include "model/attention/kv_cache.h"

namespace xtrain::train {
namespace {

int64_t next_token(const torch::Tensor& last_logits, const GenerateOptions& options, at::Generator& generator) {
  auto logits = last_logits.to(torch::kFloat32);
  if (options.temperature <= 0) return logits.argmax().item<int64_t>();
  logits = logits / options.temperature;
  if (options.top_k > 0 && options.top_k < logits.size(0)) {
    auto threshold = std::get<0>(logits.topk(options.top_k)).min();
    logits = logits.masked_fill(logits < threshold, -std::numeric_limits<float>::infinity());
  }
  return torch::multinomial(torch::softmax(logits, -1), 1, false, generator).item<int64_t>();
}

// How much of `text` may be shown: all of it, unless its end could begin the stop text.
size_t shown_length(const std::string& text, const std::string& stop) {
  if (stop.empty()) return text.size();
  for (size_t keep = std::min(stop.size() - 1, text.size()); keep > 0; --keep)
    if (text.compare(text.size() - keep, keep, stop, 0, keep) == 0) return text.size() - keep;
  return text.size();
}

// The last logits of the growing context. With a key/value cache (where the model reads one and the
// whole context fits in max_seq_len) each forward takes only the tokens added since the last;
// else each runs over the last max_seq_len tokens, with the prompt's images.
class NextLogits {
 public:
  NextLogits(model::CausalLM& model, int64_t prompt_tokens, torch::Tensor pixel_values, int64_t max_new_tokens)
      : model_(model), pixel_values_(std::move(pixel_values)) {
    const int64_t longest = prompt_tokens + max_new_tokens - 1;
    if (model.reads_kv_cache() && !pixel_values_.defined() && !model.tensor_parallel() &&
        longest <= model.config().max_seq_len)
      cache_ = std::make_unique<model::KvCache>(model.config().num_layers, longest);
  }

  torch::Tensor operator()(const std::vector<int64_t>& context) {
    const int64_t window = model_.config().max_seq_len;
    const auto size = static_cast<int64_t>(context.size());
    const int64_t start = cache_ ? fed_ : std::max<int64_t>(0, size - window);
    model::Batch input;
    input.input_ids = torch::tensor(std::vector<int64_t>(context.begin() + start, context.end()), torch::kInt64)
                          .unsqueeze(0);
    if (cache_) {
      cache_->begin(torch::ones({1, size - start}, torch::kBool), window);
      input.kv_cache = cache_.get();
      fed_ = size;
    }
    if (pixel_values_.defined()) input.extra["pixel_values"] = pixel_values_;
    return model_.logits(input).select(1, -1).squeeze(0);
  }

 private:
  model::CausalLM& model_;
  torch::Tensor pixel_values_;
  std::unique_ptr<model::KvCache> cache_;
  int64_t fed_ = 0;  // context tokens the cache holds
};

}  // namespace

std::string generate(model::CausalLM& model, const text::Tokenizer& tokenizer, const std::string& prompt,
                     const GenerateOptions& options, const std::function<void(const std::string&)>& on_text) {
  return generate(model, tokenizer, GeneratePrompt{tokenizer.encode(prompt), {}}, options, on_text);
}

std::string generate(model::CausalLM& model, const text::Tokenizer& tokenizer, const GeneratePrompt& prompt,
                     const GenerateOptions& options, const std::function<void(const std::string&)>& on_text) {
  torch::NoGradGuard no_grad;
  model.eval();
  auto generator = at::detail::createCPUGenerator(options.seed);
  std::vector<int64_t> context = prompt.ids;
  if (context.empty()) context.push_back(tokenizer.eos_id());
  NextLogits next_logits(model, static_cast<int64_t>(context.size()), prompt.pixel_values, options.max_new_tokens);
  std::vector<int64_t> generated;
  std::string text, emitted;
  auto emit = [&](size_t length) {
    if (!on_text || length <= emitted.size() || text.compare(0, emitted.size(), emitted) != 0) return;
    on_text(text.substr(emitted.size(), length - emitted.size()));
    emitted = text.substr(0, length);
  };
  for (int64_t i = 0; i < options.max_new_tokens; ++i) {
    const int64_t next = next_token(next_logits(context), options, generator);
    if (options.stop_at_eos && next == tokenizer.eos_id()) break;
    context.push_back(next);
    generated.push_back(next);
    // Decode the whole continuation each time so multi-byte characters come out whole.
    text = tokenizer.decode(generated);
    if (!options.stop.empty()) {
      if (const size_t at = text.find(options.stop); at != std::string::npos) {
        text.resize(at);
        break;
      }
    }
    emit(shown_length(text, options.stop));
  }
  emit(text.size());
  return text;
}

}  // namespace xtrain::train
