// Hugging Face config.json <-> ModelConfig, through the family's ModelSpec (model/spec/model_spec.h).
// Torch-free, so that the recipe loader can take a model's shape from a folder (model.init_from).
//
// The round trip keeps what it read: a model imported from a folder is written back as that
// folder's config.json with only the fields xtrain computes replaced (architecture, shape,
// rotary, experts, dtype); the fields xtrain reads but does not compute (token ids, dropout,
// use_cache, transformers_version, ...) stay as they were. Dropout is the one such field that
// changes training: a family that computes it (bert, vit) takes it as model.dropout, and for any
// other the recipe loader refuses a non-zero one unless model.dropout is 0 (config/hf_import.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/spec/model_config.h"

namespace xtrain::ckpt {

// config.json of a model whose documents end with eos_token_id. With `imported`, the config.json
// the model came from (a folder's, or a checkpoint's, which carries it on): that object, with
// the fields xtrain computes written over it and its other spellings of them (rope_parameters,
// dtype, ...) dropped, and its quantization_config too (the weights xtrain writes are float).
// bos/eos/pad_token_id, use_cache, output_router_logits, router_jitter_noise and the dropout
// probabilities keep an imported value other than null.
// router_aux_loss_coef keeps the imported number when xtrain's coefficient is the one it
// imported (model::router_aux_loss_coef_from_hf), so that it comes back digit for digit.
nlohmann::json hf_config(const model::ModelConfig& config, int64_t eos_token_id,
                         const nlohmann::json& imported = nullptr);
// The shape in a config.json, read by the spec of its model_type; an InputError naming source and
// the field when a field is missing or mistyped, or names a feature the family does not compute.
model::ModelConfig model_config_from_hf(const nlohmann::json& config, const std::string& source);
// DIR/config.json, parsed; InputError when it is missing or not JSON.
nlohmann::json read_hf_config(const std::string& dir);
// generation_config.json for a config.json: its bos_token_id and eos_token_id (a number or a
// list, as config.json has them); null when config.json names no eos_token_id.
nlohmann::json hf_generation_config(const nlohmann::json& config);

// A dropout probability of a config.json: its field ("hidden_dropout_prob", or
// "vision_config.attention_dropout" in a sub-config) and value.
struct HfDropout {
  std::string field;
  double value = 0;
};
// The non-zero dropout probabilities of a config.json of any family (its text_config and
// vision_config included), and Mixtral's router_jitter_noise: the noise transformers adds in
// training and xtrain does not.
std::vector<HfDropout> hf_dropout(const nlohmann::json& config);
// "hidden_dropout_prob 0.1, attention_probs_dropout_prob 0.1"
std::string describe(const std::vector<HfDropout>& dropout);

}  // namespace xtrain::ckpt
