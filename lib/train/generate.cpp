#include "train/generate.h"

#include <torch/torch.h>

namespace xtrain::train {

std::string generate(model::CausalLM& model, const data::Tokenizer& tokenizer,
                     const std::string& prompt, const GenerateOptions& options,
                     const std::function<void(const std::string&)>& on_text) {
  torch::NoGradGuard no_grad;
  model.eval();
  auto generator = at::detail::createCPUGenerator(options.seed);
  std::vector<int64_t> context = tokenizer.encode(prompt);
  if (context.empty()) context.push_back(tokenizer.eos_id());
  const int64_t window = model.config().max_seq_len;
  std::vector<int64_t> generated;
  std::string emitted;
  for (int64_t i = 0; i < options.max_new_tokens; ++i) {
    const int64_t start = std::max<int64_t>(0, static_cast<int64_t>(context.size()) - window);
    model::Batch input;
    input.input_ids = torch::tensor(std::vector<int64_t>(context.begin() + start, context.end()), torch::kInt64)
                          .unsqueeze(0);
    auto logits = model.logits(input).select(1, -1).squeeze(0).to(torch::kFloat32);
    int64_t next;
    if (options.temperature <= 0) {
      next = logits.argmax().item<int64_t>();
    } else {
      logits = logits / options.temperature;
      if (options.top_k > 0 && options.top_k < logits.size(0)) {
        auto threshold = std::get<0>(logits.topk(options.top_k)).min();
        logits = logits.masked_fill(logits < threshold, -std::numeric_limits<float>::infinity());
      }
      next = torch::multinomial(torch::softmax(logits, -1), 1, false, generator).item<int64_t>();
    }
    if (options.stop_at_eos && next == tokenizer.eos_id()) break;
    context.push_back(next);
    generated.push_back(next);
    // Decode the whole continuation each time so multi-byte characters come out whole.
    std::string text = tokenizer.decode(generated);
    if (on_text && text.size() > emitted.size() && text.compare(0, emitted.size(), emitted) == 0) {
      on_text(text.substr(emitted.size()));
      emitted = text;
    }
  }
  std::string text = tokenizer.decode(generated);
  if (on_text && text.size() > emitted.size()) on_text(text.substr(emitted.size()));
  return text;
}

}  // namespace xtrain::train
