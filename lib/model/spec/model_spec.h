// ModelSpec: what xtrain knows of one model family, in one place, selected by model.family (as
// torchtitan's TrainSpec): the layers its models are made of, its Hugging Face adapter
// (config.json and tensor name, both ways), its weight-decay rule, and what its models can do
// (Capabilities), which the recipe checks and the commands ask instead of a family's name.
//
// The specs need no LibTorch (they form xtrain_model_spec, with model/spec/hf_config): the recipe
// loader and the fuzz targets read them. Building a model is model/'s (model/model_builder.h),
// by the spec's architecture; the model (a CausalLM) brings its own init and shard plan from
// its module tree.
//
// Adding a family: its layers and a CausalLM in model/ (and, for a new architecture, its case
// in model_builder.cpp), a ModelSpec beside them, one line in model_registry.cpp, and a golden
// test against transformers. Nothing else changes.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/spec/attention_features.h"
#include "model/spec/model_config.h"

namespace xtrain::model {

// The layers a family's models are made of (model/model_builder.cpp builds each).
enum class Architecture {
  llama_decoder,  // model/llama.h, with the spec's attention features
  bert,           // model/bert/bert.h
  llava,          // model/llava/llava.h: a CLIP tower in front of a llama decoder
  vit,            // model/vit/vit.h: an image classifier
  t5,             // model/t5/t5.h: an encoder-decoder
  clip,           // model/clip/clip.h: a text and an image tower trained contrastively
};

// What a family's models support. A recipe that asks for more is refused by the recipe loader
// (naming the family, the key and the fix) before any model is built.
struct Capabilities {
  // Splits over parallel.tp (CausalLM::tensor_parallel_plan, use_tensor_parallel).
  bool tensor_parallel = false;
  // Splits into parallel.pp stages (CausalLM::forward_chunk).
  bool pipeline = false;
  // Splits its rows over parallel.cp ranks: a text decoder, whose layers other than attention
  // are token-local and whose attention takes AttentionImpl::kernel.
  bool context_parallel = false;
  // Its feed-forward layers are mixtures of experts (model.num_experts required, and
  // parallel.ep may split them: CausalLM::moe_blocks).
  bool experts = false;
  // A decoder, trained on the next token (data.objective clm), that generates text; else an
  // encoder trained on masked tokens (data.objective mlm), which does not generate.
  bool causal = true;
  // model.pad_token_id is part of its shape (an embedding row), taken from config.json.
  bool pad_token = false;
  // Trains extra depths that predict tokens further ahead (model.mtp_layers; DeepSeek-V3).
  bool multi_token_prediction = false;
  // Reads images beside its tokens (a vision tower; image-chat data, generate --image).
  bool images = false;
  // Classifies whole images: it reads images with integer labels (data/image_class_dataset.h),
  // one target an image, and the vocabulary is its labels.
  bool image_classes = false;
  // Computes dropout in training (model.dropout > 0; model/layers/keyed_dropout.h).
  bool dropout = false;
  // An encoder and a decoder (t5), trained on span corruption (data.objective span_corruption):
  // its batches carry the decoder's inputs apart (Batch::decoder_input_ids).
  bool encoder_decoder = false;
  // Trains on (image, caption) pairs with CLIP's symmetric contrastive loss, computed by the
  // model itself (ModelOutput::loss); under data parallelism every rank's embeddings are
  // gathered, so that the negatives are the global batch's (CausalLM::gather_over_data_ranks).
  bool contrastive = false;
};

struct ModelSpec {
  std::string family;           // model.family
  std::string hf_architecture;  // config.json "architectures"[0], e.g. Qwen3ForCausalLM
  std::string hf_model_type;    // config.json "model_type"
  std::string description;      // one line, for the recipe reference
  Capabilities capabilities;
  // The module names LoRA adapters can wrap (model.lora.targets) in a model of this shape, as
  // PEFT's target_modules name them: the family's Linear layers in transformers and in xtrain
  // alike. Empty (no function): the family takes no adapters.
  std::function<std::vector<std::string>(const ModelConfig&)> lora_targets;

  Architecture architecture = Architecture::llama_decoder;
  AttentionFeatures attention;  // what a llama decoder's attention adds (qwen2's biases, qwen3's norms)
  // config.json of a model of this family whose documents end with eos_token_id.
  std::function<nlohmann::json(const ModelConfig&, int64_t eos_token_id)> to_hf_config;
  // The shape in a config.json; a field missing or mistyped, or a feature the family's layers do
  // not compute, is an InputError naming `source` and the field.
  std::function<ModelConfig(const nlohmann::json&, const std::string& source)> from_hf_config;
  // A parameter's Hugging Face tensor name, and back (identity where they already agree).
  std::function<std::string(const std::string&)> to_hf_name, from_hf_name;
  // A parameter that transformers' checkpoints store as several tensors (each expert's
  // projections apart): their names, in the order whose flattenings, concatenated, are the
  // parameter's (see hf_stored_tensors); none for one stored whole under to_hf_name, and when
  // not set.
  std::function<std::vector<std::string>(const std::string& name, int64_t first_dimension)> hf_parts;
  // A buffer that transformers' checkpoints store beside the parameters (DeepSeek-V3's
  // gate.e_score_correction_bias): written by export, read from a folder that has it. None when
  // not set.
  std::function<bool(const std::string& name)> hf_buffer;
  // Tensors a folder may hold that a model of this shape does not read (DeepSeek-V3's
  // multi-token prediction layers beyond model.mtp_layers, and their copies of the shared
  // embedding and head); none when not set.
  std::function<bool(const ModelConfig& config, const std::string& hf_name)> hf_unused;
  // Tensors a folder stores as copies of a parameter, as (HF name, parameter name): written by
  // export, not read back (DeepSeek-V3's prediction layers hold the shared embedding and head).
  std::function<std::vector<std::pair<std::string, std::string>>(const ModelConfig& config)> hf_copies;
  // The parts model.freeze can name, each with the prefix of its parameters' names (llava's
  // vision_tower, projector, language_model); none for a family of one part.
  std::vector<std::pair<std::string, std::string>> parts;
  // Whether AdamW decays a parameter of this name and number of dimensions.
  std::function<bool(const std::string& name, int64_t dims)> decays;
  // Problems of a recipe's model section that only this family has, as (key, message); none
  // when not set.
  std::function<std::vector<std::pair<std::string, std::string>>(const ModelConfig&)> check;
};

// The tensors a parameter of this name and shape is stored as in a Hugging Face folder, with
// their shapes: itself under to_hf_name, or its hf_parts, each of the parameter's shape without
// its first dimension and with the second divided among the parts of one first index.
std::vector<std::pair<std::string, std::vector<int64_t>>> hf_stored_tensors(const ModelSpec& spec,
                                                                           const std::string& name,
                                                                           const std::vector<int64_t>& shape);

// The registered families, in the order the recipe reference lists them.
const std::vector<ModelSpec>& model_specs();
std::vector<std::string> model_families();
// The spec of a family; std::invalid_argument for an unknown one (the recipe check comes first).
const ModelSpec& model_spec(const std::string& family);
const ModelSpec* find_model_spec(const std::string& family);  // null for an unknown one
// The spec of a Hugging Face config.json, by model_type, else architectures[0]; an InputError
// naming `source` and the families xtrain trains when none matches.
const ModelSpec& model_spec_for_hf(const nlohmann::json& config, const std::string& source);

}  // namespace xtrain::model
