// Batch: what a model's forward reads. input_ids and the layout are every family's; labels are
// the loss's (the model never reads them); `extra` holds the inputs only some families take,
// by name (pixel_values for vision-language models, attention_mask for padded encoders).
#pragma once
#include <map>
#include <string>
#include <vector>

#include <torch/types.h>

#include "model/layers/keyed_dropout.h"
#include "model/layers/sequence_layout.h"

namespace xtrain::model {

class KvCache;

struct Batch {
  torch::Tensor input_ids;  // int64 [B, T]
  torch::Tensor labels;     // int64 [B, T], -100 where a token carries no loss; may be undefined
  SequenceLayout layout;    // document boundaries and positions of packed rows
  std::map<std::string, torch::Tensor> extra;
  // Encoder-decoder families (t5) only: the decoder's input ids, int64 [B, T_dec]; input_ids are
  // then the encoder's and labels the decoder's targets. Undefined for every other family.
  torch::Tensor decoder_input_ids;
  // What the trainer multiplies this batch's loss by before backward (its share of the global
  // batch, times a loss scale). A model whose blocks have auxiliary losses gives them this
  // gradient inside the blocks' own backward (model/layers/aux_loss.h).
  double loss_weight = 1.0;
  // Set by the training step only: the key of the dropout masks of a family that computes
  // dropout (model.dropout); undefined, no dropout.
  DropoutKey dropout;
  // Incremental decoding (model/attention/kv_cache.h), for the families whose
  // CausalLM::reads_kv_cache(): input_ids are then only the new tokens of the cache's rows, their
  // positions the cache's, and the model appends their keys and values to it. Null: no cache.
  KvCache* kv_cache = nullptr;
  // Multi-token prediction under context parallelism: depth k's input ids and labels (the rows'
  // tokens and labels k further ahead, shifted before the sequence was split; this rank's part)
  // and the whole micro batch's count of depth k's labels, by which its loss divides. Empty: the
  // model and the loss shift input_ids and labels themselves.
  std::vector<torch::Tensor> ids_ahead, labels_ahead;
  std::vector<int64_t> labels_ahead_counts;

  // The extra input `name`, or an undefined tensor.
  torch::Tensor extra_input(const std::string& name) const {
    auto it = extra.find(name);
    return it == extra.end() ? torch::Tensor() : it->second;
  }
};

}  // namespace xtrain::model
