// What `xtrain generate` and `xtrain export` read from a checkpoint folder besides its weights,
// and the prompt generate builds from it. A training checkpoint names its tokenizer, chat
// template and (through model.init_from) image processor in its recipe.yaml; an exported or
// downloaded folder has tokenizer.json, tokenizer.model or preprocessor_config.json beside its
// weights, or nothing (the byte tokenizer, chatml, CLIP's processor at the tower's size).
#pragma once
#include <string>
#include <vector>

#include "model/spec/model_config.h"
#include "text/tokenizer.h"
#include "train/generate.h"

namespace xtrain::train {

struct CheckpointDataSpec {
  std::string tokenizer;        // a data.tokenizer value
  std::string chat_template;    // a data.chat_template value
  std::string image_processor;  // a preprocessor_config.json, or "" for the defaults
  // model.init_from's generation_config.json, which an export keeps, or "" for none.
  std::string generation_config;
  // The recipe's model.init_from folder (its "hf:" dropped), or "": a LoRA export's base model.
  std::string base_model;
};

CheckpointDataSpec checkpoint_data_spec(const std::string& dir);

struct PromptRequest {
  std::string text;
  std::vector<std::string> images;  // files, one per "<image>" in the text (put first when it has none)
  bool chat = false;                // text is the user's turn, written by the chat template
};

// The ids and pixel values of a request; with chat, options.stop becomes the template's end of
// turn. Images for a model without a vision tower, a count that differs from the placeholders,
// or a file that does not decode, are InputErrors naming the problem.
GeneratePrompt make_generate_prompt(const model::ModelConfig& config, const text::Tokenizer& tokenizer,
                                    const CheckpointDataSpec& spec, const PromptRequest& request,
                                    GenerateOptions& options);

}  // namespace xtrain::train
