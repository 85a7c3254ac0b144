// What a resumed run changes from the run that wrote its checkpoint (its recipe.yaml):
//   model.*                                   must be the same: an InputError;
//   the data order and batch geometry          (data.train, data.seq_len, data.pack, data.shuffle,
//                                              data.balance_window, train.global_batch_size) break
//                                              bit-exact resume: refused unless the key is in
//                                              `allowed` (--allow-changed KEY);
//   run.seed, optim.*, train.* and the rest    taken, and returned as notices to print;
//   the layout, memory, logging, checkpoint and dist options are free to change and say nothing.
#pragma once
#include <string>
#include <vector>

#include "config/recipe.h"

namespace xtrain::train {

// model.* only: checked before any tensor is read.
void check_model_unchanged(const config::Recipe& recipe, const std::string& saved_recipe_yaml,
                           const std::string& checkpoint_dir);

// The notices, one per changed key: "optim.lr: 0.003 -> 0.001".
std::vector<std::string> check_resume_changes(const config::Recipe& recipe, const std::string& saved_recipe_yaml,
                                              const std::string& checkpoint_dir,
                                              const std::vector<std::string>& allowed, bool model_only = false);

}  // namespace xtrain::train
