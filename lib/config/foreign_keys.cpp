#include "config/foreign_keys.h"

#include <array>
#include <string_view>

#include <fmt/format.h>

namespace xtrain::config {
namespace {

struct ForeignKey {
  std::string_view name;
  std::string_view xtrain;  // the key, or the key with the value that expresses the same thing
};

constexpr std::array kForeignKeys{
    // transformers' TrainingArguments
    ForeignKey{"output_dir", "run.dir"},
    ForeignKey{"learning_rate", "optim.lr"},
    ForeignKey{"max_steps", "train.steps"},
    ForeignKey{"per_device_train_batch_size", "train.micro_batch_size"},
    ForeignKey{"max_grad_norm", "optim.grad_clip"},
    ForeignKey{"adam_beta1", "optim.betas"},
    ForeignKey{"adam_beta2", "optim.betas"},
    ForeignKey{"adam_epsilon", "optim.eps"},
    ForeignKey{"lr_scheduler_type", "optim.schedule"},
    ForeignKey{"bf16", "train.dtype: bf16"},
    ForeignKey{"fp16", "train.dtype: fp16"},
    ForeignKey{"gradient_checkpointing", "memory.recompute"},
    ForeignKey{"save_steps", "checkpoint.every"},
    ForeignKey{"save_total_limit", "checkpoint.keep"},
    ForeignKey{"resume_from_checkpoint", "checkpoint.resume"},
    ForeignKey{"logging_steps", "train.log_every"},
    ForeignKey{"eval_steps", "train.eval_every"},
    ForeignKey{"model_name_or_path", "model.init_from: hf:DIR"},
    ForeignKey{"tokenizer_name", "data.tokenizer"},
    ForeignKey{"max_seq_length", "data.seq_len"},
    // Hugging Face config.json
    ForeignKey{"num_hidden_layers", "model.num_layers"},
    ForeignKey{"num_attention_heads", "model.num_heads"},
    ForeignKey{"num_key_value_heads", "model.num_kv_heads"},
    ForeignKey{"max_position_embeddings", "model.max_seq_len"},
    ForeignKey{"rms_norm_eps", "model.norm_eps"},
    ForeignKey{"layer_norm_eps", "model.norm_eps"},
    ForeignKey{"tie_word_embeddings", "model.tie_embeddings"},
    ForeignKey{"initializer_range", "model.init_std"},
    // Megatron-LM arguments
    ForeignKey{"train_iters", "train.steps"},
    ForeignKey{"seq_length", "data.seq_len"},
    ForeignKey{"ffn_hidden_size", "model.intermediate_size"},
    ForeignKey{"clip_grad", "optim.grad_clip"},
    ForeignKey{"lr_warmup_iters", "optim.warmup_steps"},
    ForeignKey{"lr_decay_style", "optim.schedule"},
    ForeignKey{"recompute_granularity", "memory.recompute"},
    ForeignKey{"save_interval", "checkpoint.every"},
    ForeignKey{"log_interval", "train.log_every"},
    ForeignKey{"eval_interval", "train.eval_every"},
    ForeignKey{"tensor_model_parallel_size", "parallel.tp"},
    ForeignKey{"pipeline_model_parallel_size", "parallel.pp"},
    ForeignKey{"expert_model_parallel_size", "parallel.ep"},
    ForeignKey{"num_layers_per_virtual_pipeline_stage", "parallel.pp_virtual_stages"},
    // torchtitan's job config
    ForeignKey{"data_parallel_shard_degree", "parallel.fsdp"},
    ForeignKey{"data_parallel_replicate_degree", "parallel.dp"},
    ForeignKey{"tensor_parallel_degree", "parallel.tp"},
    ForeignKey{"pipeline_parallel_degree", "parallel.pp"},
    ForeignKey{"expert_parallel_degree", "parallel.ep"},
    ForeignKey{"pipeline_parallel_schedule", "parallel.pp_schedule"},
};

}  // namespace

std::optional<std::string> foreign_key_hint(const std::string& path) {
  const auto dot = path.rfind('.');
  const std::string_view leaf = dot == std::string::npos ? std::string_view(path) : std::string_view(path).substr(dot + 1);
  // Accumulation is not a knob of its own: it follows from the global batch.
  if (leaf == "gradient_accumulation_steps" || leaf == "gradient_accumulation")
    return std::string(
        "set train.global_batch_size instead: accumulation steps = global batch / (train.micro_batch_size x "
        "data-parallel ranks)");
  for (const auto& key : kForeignKeys)
    if (key.name == leaf) return fmt::format("did you mean {}?", key.xtrain);
  return std::nullopt;
}

}  // namespace xtrain::config
