// What a resumed run changes from the run that wrote its checkpoint (its recipe.yaml):
//   model.*                                   must be the same: an InputError;
//   what the next steps read and its order     (run.seed, data.train, data.tokenizer,
//                                              data.chat_template, data.seq_len, data.pack,
//                                              data.shuffle, data.balance_window,
//                                              train.global_batch_size) breaks bit-exact resume:
//                                              refused, naming every such change, unless allowed
//                                              (--allow-data-change: all; --allow-changed KEY: one);
//   optim.name                                 refused (each optimizer would read the other's
//                                              state as its own) unless --allow-changed optim.name:
//                                              then its notice says the state starts afresh, which
//                                              the caller does;
//   optim.*, train.* and the rest              taken, and returned as notices to print;
//   the layout, memory, logging, checkpoint and dist options are free to change and say nothing.
#pragma once
#include <string>
#include <vector>

#include "config/recipe.h"

namespace xtrain::train {

// model.* only: checked before any tensor is read.
void check_model_unchanged(const config::Recipe& recipe, const std::string& saved_recipe_yaml,
                           const std::string& checkpoint_dir);

struct ResumeAllowance {
  std::vector<std::string> keys;  // --allow-changed KEY
  bool data_change = false;       // --allow-data-change: every data-order key
};

// The notices, one per changed key: "optim.lr: 0.003 -> 0.001".
std::vector<std::string> check_resume_changes(const config::Recipe& recipe, const std::string& saved_recipe_yaml,
                                              const std::string& checkpoint_dir, const ResumeAllowance& allowed,
                                              bool model_only = false);

}  // namespace xtrain::train
