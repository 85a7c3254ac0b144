// `xtrain data batch RECIPE --out FILE`: the samples a recipe's model reads, as the data pipeline
// makes them (tokenized, masked for data.objective mlm), written to a safetensors file with
// input_ids, labels (-100 where no loss) and attention_mask, int64 [count, seq_len]: what a
// reference implementation needs to score the same batch. Image datasets of one image a sample
// add pixel_values, float32 [count, 3, size, size], and an image classifier's training split with
// an augmentation its draws, int64 [count, 5] (top, left, height, width, mirrored).
#pragma once
#include <cstdint>
#include <string>

#include "config/recipe.h"

namespace xtrain::train {

struct BatchDumpOptions {
  std::string split = "eval";  // eval | train (the latter in its unshuffled order)
  int64_t first = 0;           // the first sample
  int64_t count = 8;
  std::string out;
};

int dump_batch(const config::Recipe& recipe, const BatchDumpOptions& options);

}  // namespace xtrain::train
