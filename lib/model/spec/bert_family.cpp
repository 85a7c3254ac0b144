#include "model/spec/bert_family.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/spec/hf_fields.h"
#include "util/input_error.h"

namespace xtrain::model {
namespace {

// Dropout: model.dropout, for the hidden states and the attention probabilities alike.
nlohmann::json bert_config(const ModelConfig& c, int64_t /*eos_token_id: [SEP] ends documents, BERT names none*/) {
  return {{"architectures", {"BertForMaskedLM"}},
          {"model_type", "bert"},
          {"vocab_size", c.vocab_size},
          {"hidden_size", c.hidden_size},
          {"num_hidden_layers", c.num_layers},
          {"num_attention_heads", c.num_heads},
          {"intermediate_size", c.intermediate_size},
          {"hidden_act", "gelu"},
          {"hidden_dropout_prob", c.dropout},
          {"attention_probs_dropout_prob", c.dropout},
          {"max_position_embeddings", c.max_seq_len},
          {"type_vocab_size", c.type_vocab_size},
          {"initializer_range", c.init_std},
          {"layer_norm_eps", c.norm_eps},
          {"pad_token_id", c.pad_token_id},
          {"position_embedding_type", "absolute"},
          {"tie_word_embeddings", true},
          {"is_decoder", false},
          {"torch_dtype", "float32"}};
}

ModelConfig config_from_bert(const nlohmann::json& json, const std::string& source) {
  auto integer = [&](const char* name, std::optional<int64_t> fallback = std::nullopt) {
    if (!json.contains(name) || json.at(name).is_null()) {
      if (fallback) return *fallback;
      throw InputError(fmt::format("{}: missing field \"{}\"", source, name));
    }
    return HfFields::integer_of(json.at(name), source, name);
  };
  ModelConfig c;
  c.family = "bert";
  c.vocab_size = integer("vocab_size");
  c.hidden_size = integer("hidden_size");
  c.num_layers = integer("num_hidden_layers");
  c.num_heads = c.num_kv_heads = integer("num_attention_heads");
  c.intermediate_size = integer("intermediate_size");
  c.max_seq_len = integer("max_position_embeddings");
  c.type_vocab_size = integer("type_vocab_size", 2);
  if (c.type_vocab_size < 1)
    throw InputError(fmt::format("{}: type_vocab_size {} leaves no segment embedding (BERT's is 2)", source,
                                 c.type_vocab_size));
  c.pad_token_id = integer("pad_token_id", 0);
  const HfFields f(json, source);
  c.norm_eps = f.number("layer_norm_eps", 1e-12);
  c.init_std = f.number("initializer_range", 0.02);
  c.tie_embeddings = true;
  if (c.num_heads <= 0 || c.hidden_size % c.num_heads != 0)
    throw InputError(fmt::format("{}: hidden_size {} does not divide into num_attention_heads {}", source,
                                 c.hidden_size, c.num_heads));
  const auto text = [&](const char* name, const char* fallback) { return f.text(name, fallback); };
  if (text("hidden_act", "gelu") != "gelu")
    throw InputError(fmt::format("{}: hidden_act \"{}\"; xtrain's BERT computes the exact GELU (\"gelu\")", source,
                                 text("hidden_act", "")));
  if (text("position_embedding_type", "absolute") != "absolute")
    throw InputError(fmt::format("{}: position_embedding_type \"{}\"; xtrain's BERT has absolute positions", source,
                                 text("position_embedding_type", "")));
  if (!f.boolean("tie_word_embeddings", true))
    throw InputError(fmt::format("{}: tie_word_embeddings is false; xtrain's BERT ties the masked-LM decoder to the "
                                 "word embeddings",
                                 source));
  return c;
}

}  // namespace

ModelSpec bert_spec() {
  ModelSpec spec;
  spec.family = "bert";
  spec.hf_architecture = "BertForMaskedLM";
  spec.hf_model_type = "bert";
  spec.description = "encoder: post-LN layers, bidirectional attention, GELU; trained on masked tokens (data.objective mlm)";
  // Split by tensor parallelism (without sequence parallelism) and into pipeline stages;
  // model.pad_token_id is its word embeddings' padding row.
  spec.capabilities.tensor_parallel = spec.capabilities.pipeline = true;
  spec.capabilities.causal = false;
  spec.capabilities.pad_token = true;
  spec.capabilities.dropout = true;  // model/bert/bert.h
  spec.architecture = Architecture::bert;
  spec.to_hf_config = bert_config;
  spec.from_hf_config = config_from_bert;
  spec.to_hf_name = spec.from_hf_name = [](const std::string& name) { return name; };
  // As BERT's recipes: biases and LayerNorm gains do not decay.
  spec.decays = [](const std::string& /*name*/, int64_t dims) { return dims >= 2; };
  spec.check = [](const ModelConfig& c) {
    std::vector<std::pair<std::string, std::string>> problems;
    if (!c.tie_embeddings)
      problems.emplace_back("model.tie_embeddings", "bert ties its masked-LM decoder to the word embeddings: set it true");
    if (c.num_kv_heads != 0 && c.num_kv_heads != c.num_heads)
      problems.emplace_back("model.num_kv_heads", "bert's attention has as many key/value heads as query heads");
    return problems;
  };
  return spec;
}

}  // namespace xtrain::model
