// Declaration of every recipe key. The recipe reference (docs/recipes.md) is generated from this
// table (`xtrain options`), and a test keeps the two identical.
#include <algorithm>
#include <cstdlib>
#include <thread>

#include <fmt/ranges.h>

#include "config/checks.h"
#include "config/option_registry.h"
#include "model/spec/model_spec.h"
#include "text/chat_template.h"
#include "util/choice.h"
#include "util/signal_names.h"

namespace xtrain::config {

namespace {

// The families come from the model registry, each with its spec's one line.
std::string family_doc() {
  std::vector<std::string> lines;
  for (const auto& spec : model::model_specs()) lines.push_back(fmt::format("{} ({})", spec.family, spec.description));
  return fmt::format("Model family: {}.", fmt::join(lines, "; "));
}

using namespace checks;
using Floats = std::vector<double>;

#define FIELD(member) [](Recipe& r) -> auto& { return r.member; }

// A key whose value is one of the names of the enum E: read once into E, listed in "must be one
// of" from E's table, written back by its name.
template <class E>
void add_choice(OptionRegistry& r, std::string path, std::function<E&(Recipe&)> field, E default_value,
                std::string doc) {
  r.add_text(
      std::move(path), to_string(default_value), std::move(doc),
      [field, check = one_of(util::choice_names<E>())](const std::string& text,
                                                      Recipe& recipe) -> std::optional<std::string> {
        if (auto problem = check(text)) return problem;
        field(recipe) = *util::parse_choice<E>(text);
        return std::nullopt;
      },
      [field](const Recipe& recipe) -> std::string { return to_string(field(const_cast<Recipe&>(recipe))); });
}

// checkpoint.resume: a word of ResumeKind, or a checkpoint folder.
void add_resume(OptionRegistry& r, std::string doc) {
  r.add_text(
      "checkpoint.resume", "auto", std::move(doc),
      [check = not_empty()](const std::string& text, Recipe& recipe) -> std::optional<std::string> {
        if (auto problem = check(text)) return problem;
        recipe.checkpoint.resume = parse_resume(text);
        return std::nullopt;
      },
      [](const Recipe& recipe) { return resume_text(recipe.checkpoint.resume); });
}

Check<Floats> adam_betas() {
  return [](const Floats& betas) -> std::optional<std::string> {
    if (betas.size() != 2) return fmt::format("expected two values [beta1, beta2], got {}", betas.size());
    for (double beta : betas)
      if (beta < 0 || beta >= 1) return fmt::format("each beta must be in [0, 1), got {}", beta);
    return std::nullopt;
  };
}

// [min, max] with low <= min <= max <= high (a crop's share of the area, or its aspect ratio).
Check<Floats> increasing_pair(double low, double high, const char* what) {
  return [low, high, what](const Floats& pair) -> std::optional<std::string> {
    if (pair.size() != 2) return fmt::format("expected two values [min, max] of {}, got {}", what, pair.size());
    if (!(pair[0] > low && pair[0] <= pair[1] && pair[1] <= high))
      return fmt::format("expected {} < min <= max <= {} ({}), got [{}, {}]", low, high, what, pair[0], pair[1]);
    return std::nullopt;
  };
}

Check<std::string> chunk_spec() {
  return [](const std::string& value) -> std::optional<std::string> {
    if (value == "auto" || value == "off") return std::nullopt;
    char* end = nullptr;
    const long long tokens = std::strtoll(value.c_str(), &end, 10);
    if (!value.empty() && *end == '\0' && tokens >= 1) return std::nullopt;
    return fmt::format("expected auto, off or a positive number of tokens per chunk, got '{}'", value);
  };
}

// A probability of dropping an element: 1 would drop everything (and scale by 1 / 0).
Check<double> dropout_probability() {
  return [](const double& value) -> std::optional<std::string> {
    if (value >= 0 && value < 1) return std::nullopt;
    return fmt::format("a dropout probability is in [0, 1), got {}", value);
  };
}

// More threads than 4 per core only adds contention, and a typo like 100000 would exhaust the
// process's thread limit.
Check<int64_t> thread_count() {
  return [](const int64_t& value) -> std::optional<std::string> {
    const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
    if (value < 0 || value > 4 * cores)
      return fmt::format("must be between 0 (automatic) and 4 x the {} cores of this machine ({}), got {}", cores,
                         4 * cores, value);
    return std::nullopt;
  };
}

Check<std::string> signal_list() {
  return [](const std::string& value) { return util::check_signal_list(value); };
}

Check<std::string> init_source() {
  return [](const std::string& value) -> std::optional<std::string> {
    if (value.empty() || (value.rfind("hf:", 0) == 0 && value.size() > 3)) return std::nullopt;
    return fmt::format("expected hf:DIR (a Hugging Face model folder) or nothing, got '{}'", value);
  };
}

Check<std::string> health_schedule() {
  return [](const std::string& value) -> std::optional<std::string> {
    if (config::health_interval(value) >= -1) return std::nullopt;
    return fmt::format("expected off, start or every_N (N steps, N >= 1), got '{}'", value);
  };
}

Check<std::string> chat_template() {
  return [](const std::string& value) { return text::check_chat_template(value); };
}

void add_run_options(OptionRegistry& r) {
  r.add<std::string>("name", FIELD(name), "", "Run name; names the run folder runs/<name>.", not_empty());
  r.mark_required("name");

  r.add<std::string>("run.dir", FIELD(run.dir), "", "Run folder for checkpoints and metrics; empty means runs/<name>.");
  r.add<int64_t>("run.seed", FIELD(run.seed), 1234, "Seed for weight init and data order.", at_least<int64_t>(0));
  r.add<bool>("metrics.tensorboard", FIELD(metrics.tensorboard), true, "Also write every step's metrics.jsonl figures as TensorBoard scalars, and the resolved recipe as text, to run.dir/tensorboard (tensorboard --logdir runs/).");
}

void add_model_options(OptionRegistry& r) {
  r.add<std::string>("model.family", FIELD(model.family), "llama", family_doc(), one_of(model::model_families()));
  r.add<int64_t>("model.vocab_size", FIELD(model.vocab_size), 0, "Vocabulary size; 0 means the tokenizer's.", in_range<int64_t>(0, int64_t{1} << 24));
  r.add<int64_t>("model.hidden_size", FIELD(model.hidden_size), 256, "Width of the residual stream.", in_range<int64_t>(1, int64_t{1} << 20));
  r.add<int64_t>("model.num_layers", FIELD(model.num_layers), 4, "Number of transformer blocks.", in_range<int64_t>(1, 4096));
  r.add<int64_t>("model.num_heads", FIELD(model.num_heads), 4, "Attention (query) heads.", in_range<int64_t>(1, 16384));
  r.add<int64_t>("model.num_kv_heads", FIELD(model.num_kv_heads), 0, "Key/value heads (grouped-query attention); 0 means num_heads.", in_range<int64_t>(0, 16384));
  r.add<int64_t>("model.intermediate_size", FIELD(model.intermediate_size), 0, "SwiGLU hidden width; 0 means 8/3 x hidden_size rounded up to a multiple of 64.", in_range<int64_t>(0, int64_t{1} << 22));
  r.add<int64_t>("model.max_seq_len", FIELD(model.max_seq_len), 0, "Longest sequence the model supports; 0 means data.seq_len.", in_range<int64_t>(0, int64_t{1} << 24));
  r.add<int64_t>("model.head_dim", FIELD(model.head_dim_override), 0, "Size of each attention head; 0 means hidden_size / num_heads.", in_range<int64_t>(0, 4096));
  r.add<double>("model.rope_theta", FIELD(model.rope_theta), 10000.0, "Rotary embedding base.", positive());
  r.add<double>("model.rope_scaling_factor", FIELD(model.rope_scaling.factor), 0.0, "Rotary scaling (transformers' rope_type llama3 or yarn, as rope_scaling_type says): how much the long wavelengths are stretched; 0 means no scaling.", at_least<double>(0.0));
  r.add<double>("model.rope_low_freq_factor", FIELD(model.rope_scaling.low_freq_factor), 1.0, "Llama 3 rotary scaling: wavelengths above rope_original_max_len / this are stretched by the factor.", positive());
  r.add<double>("model.rope_high_freq_factor", FIELD(model.rope_scaling.high_freq_factor), 4.0, "Llama 3 rotary scaling: wavelengths below rope_original_max_len / this are kept; those between are blended.", positive());
  r.add<int64_t>("model.rope_original_max_len", FIELD(model.rope_scaling.original_max_len), 8192, "Rotary scaling (llama3, yarn): the context length the model was first trained for.", at_least<int64_t>(1));
  add_choice<model::RopeScalingType>(r, "model.rope_scaling_type", FIELD(model.rope_scaling.type), model::RopeScalingType::llama3, "How rope_scaling_factor stretches the rotary wavelengths: llama3 (Llama 3.1's) or yarn (YaRN: DeepSeek-V3, GPT-OSS).");
  r.add<double>("model.rope_beta_fast", FIELD(model.rope_scaling.beta_fast), 32.0, "YaRN: dimensions turning more than this many times over rope_original_max_len keep their frequency.", positive());
  r.add<double>("model.rope_beta_slow", FIELD(model.rope_scaling.beta_slow), 1.0, "YaRN: dimensions turning fewer than this many times over rope_original_max_len are interpolated by the factor; a linear ramp between.", positive());
  r.add<double>("model.rope_mscale", FIELD(model.rope_scaling.mscale), 0.0, "YaRN: with rope_mscale_all_dim, the attention factor is mscale(factor, this) / mscale(factor, rope_mscale_all_dim), mscale(s, m) = 0.1 m ln s + 1; 0 means not set.", at_least<double>(0.0));
  r.add<double>("model.rope_mscale_all_dim", FIELD(model.rope_scaling.mscale_all_dim), 0.0, "YaRN: see rope_mscale; latent attention (deepseek_v3) also multiplies its softmax scale by mscale(factor, this)^2. 0 means not set.", at_least<double>(0.0));
  r.add<double>("model.rope_attention_factor", FIELD(model.rope_scaling.attention_factor), 0.0, "YaRN: multiplies the rotary cos and sin; 0 means derived from the factor (and rope_mscale, rope_mscale_all_dim) as transformers does.", at_least<double>(0.0));
  r.add<bool>("model.rope_truncate", FIELD(model.rope_scaling.truncate), true, "YaRN: round the ramp's ends outward to whole dimensions (transformers' truncate).");
  r.add<int64_t>("model.q_lora_rank", FIELD(model.latent.q_lora_rank), 0, "Latent attention (deepseek_v3): rank of the low-rank query projection; 0 means q_proj straight from the hidden state.", in_range<int64_t>(0, int64_t{1} << 20));
  r.add<int64_t>("model.kv_lora_rank", FIELD(model.latent.kv_lora_rank), 0, "Latent attention (deepseek_v3): width of the key/value latent every head's key and value are expanded from; 0 means grouped-query attention instead.", in_range<int64_t>(0, int64_t{1} << 20));
  r.add<int64_t>("model.qk_nope_head_dim", FIELD(model.latent.qk_nope_head_dim), 0, "Latent attention: features of each query and key head without rotary position.", in_range<int64_t>(0, 4096));
  r.add<int64_t>("model.qk_rope_head_dim", FIELD(model.latent.qk_rope_head_dim), 0, "Latent attention: rotated features of each query head, and of the key part shared by every head.", in_range<int64_t>(0, 4096));
  r.add<int64_t>("model.v_head_dim", FIELD(model.latent.v_head_dim), 0, "Latent attention: features of each value head.", in_range<int64_t>(0, 4096));
  r.add<bool>("model.rope_interleave", FIELD(model.latent.rope_interleave), true, "Latent attention: the rotated features are stored in interleaved pairs, as in DeepSeek's checkpoints (transformers' rope_interleave).");
  r.add<int64_t>("model.sliding_window", FIELD(model.sliding_window), 0, "Sliding-window attention (gpt_oss): the layers layer_types names sliding_attention see only this many latest keys of their document, the token's own included.", in_range<int64_t>(0, int64_t{1} << 30));
  r.add<std::vector<std::string>>("model.layer_types", FIELD(model.layer_types), {}, "Each layer's attention, sliding_attention or full_attention (gpt_oss; transformers' layer_types); empty means full attention everywhere.");
  r.add<double>("model.swiglu_limit", FIELD(model.swiglu_limit), 7.0, "gpt_oss experts: gate clamped above at this, up clamped to +-this.", positive());
  r.add<double>("model.swiglu_alpha", FIELD(model.swiglu_alpha), 1.702, "gpt_oss experts: the activation is g * sigmoid(alpha g).", positive());
  r.add<int64_t>("model.mtp_layers", FIELD(model.mtp_layers), 0, "Multi-token prediction (deepseek_v3): extra depths after the decoder, depth k predicting the token k ahead of the next from depth k-1's states and the embedding of the token k ahead, through the shared output head; logged as aux_loss.mtp_K. Exported as DeepSeek's layers num_layers + k - 1; 0 means none.", in_range<int64_t>(0, 16));
  r.add<double>("model.mtp_loss_weight", FIELD(model.mtp_loss_weight), 0.1, "Multi-token prediction: the training loss adds this times the mean of the depths' losses (DeepSeek-V3's lambda: 0.3, then 0.1).", at_least<double>(0.0));
  r.add<double>("model.norm_eps", FIELD(model.norm_eps), 1e-5, "RMSNorm epsilon.", positive());
  r.add<int64_t>("model.pad_token_id", FIELD(model.pad_token_id), 0, "bert: the padding token's id, whose embedding row takes no gradient from lookups (transformers' padding_idx); the tokenizer's [PAD] must have it.", at_least<int64_t>(0));
  r.add<bool>("model.tie_embeddings", FIELD(model.tie_embeddings), false, "Share the token embedding with the output projection.");
  r.add<double>("model.init_std", FIELD(model.init_std), 0.02, "Std of the normal weight init (output projections of each block use init_std/sqrt(2*num_layers)).", positive());
  r.add<int64_t>("model.num_experts", FIELD(model.num_experts), 0, "Experts of each MoE layer (qwen3_moe); 0 means every layer is dense.", in_range<int64_t>(0, 65536));
  r.add<int64_t>("model.num_experts_per_tok", FIELD(model.num_experts_per_tok), 0, "Experts each token is routed to (top k); 0 with num_experts 0.", in_range<int64_t>(0, 65536));
  r.add<int64_t>("model.moe_intermediate_size", FIELD(model.moe_intermediate_size), 0, "SwiGLU hidden width of each expert.", in_range<int64_t>(0, int64_t{1} << 22));
  r.add<bool>("model.norm_topk_prob", FIELD(model.norm_topk_prob), true, "Renormalise each token's top-k router weights to sum to 1.");
  r.add<int64_t>("model.first_k_dense", FIELD(model.first_k_dense), 0, "Leading layers that keep the dense MLP (transformers' mlp_only_layers 0..k-1).", at_least<int64_t>(0));
  r.add<int64_t>("model.moe_layer_step", FIELD(model.moe_layer_step), 1, "After first_k_dense, every n-th layer is a MoE layer (transformers' decoder_sparse_step).", at_least<int64_t>(1));
  r.add<double>("model.router_aux_loss_coef", FIELD(model.router_aux_loss_coef), 0.0, "Coefficient of the load-balancing loss, E/(k T^2) sum_e count_e P_e averaged over the MoE layers (1 when balanced); 0 means none.", at_least<double>(0.0));
  add_choice<model::AuxLossScope>(r, "model.router_aux_loss_scope", FIELD(model.router_aux_loss_scope), model::AuxLossScope::layer, "layer: the load-balancing loss of each MoE layer, averaged over the layers (Megatron, XTuner); model: one loss over the counts and probabilities of every layer's router at once, as transformers' load_balancing_loss_func (not with parallel.pp, whose stages each hold some layers).");
  r.add<bool>("model.router_aux_loss_global_average", FIELD(model.router_aux_loss_global_average), false, "Count each expert's tokens over the micro batch of every data rank (one all-reduce per forward), so that the balancing loss is the global batch's rather than each rank's; its value then depends on the number of data ranks. Not with parallel.pp.");
  r.add<double>("model.router_z_loss_coef", FIELD(model.router_z_loss_coef), 0.0, "Coefficient of the router z-loss, mean(logsumexp(logits)^2) averaged over the MoE layers; 0 means none.", at_least<double>(0.0));
  add_choice<model::Router>(r, "model.router", FIELD(model.router), model::Router::softmax, "How tokens choose experts: softmax (top k of the softmax) or sigmoid_bias (top k of sigmoid scores plus an expert bias that the trainer moves toward balance each step, DeepSeek-V3).");
  r.add<double>("model.router_bias_update_rate", FIELD(model.router_bias_update_rate), 1e-3, "sigmoid_bias: each step, bias += rate * sign(mean load - load), the loads summed over the data ranks.", at_least<double>(0.0));
  r.add<int64_t>("model.n_group", FIELD(model.n_group), 1, "sigmoid_bias: experts fall in n_group equal groups, of which each token may use topk_group.", at_least<int64_t>(1));
  r.add<int64_t>("model.topk_group", FIELD(model.topk_group), 1, "sigmoid_bias: groups each token may choose experts from (the groups with the highest sums of their two best scores).", at_least<int64_t>(1));
  r.add<double>("model.routed_scaling_factor", FIELD(model.routed_scaling_factor), 1.0, "Multiplies the routed experts' weights.", at_least<double>(0.0));
  r.add<int64_t>("model.num_shared_experts", FIELD(model.num_shared_experts), 0, "Experts every token passes through, as one SwiGLU of moe_intermediate_size x this.", in_range<int64_t>(0, 1024));
  r.add<bool>("model.shared_expert_gate", FIELD(model.shared_expert_gate), false, "Scale the shared experts' output by sigmoid(a learned [1, H] gate), as Qwen2-MoE.");
  r.add<double>("model.capacity_factor", FIELD(model.capacity_factor), 0.0, "0: dropless. Otherwise each expert takes at most ceil(factor x tokens x k / experts) of a micro batch's tokens on a rank; the others pass through the residual and are counted as dropped.", at_least<double>(0.0));
  add_choice<model::DropPolicy>(r, "model.drop_policy", FIELD(model.drop_policy), model::DropPolicy::probs, "With a capacity: which of an expert's tokens are dropped, those of lowest router weight (probs) or the latest (position).");
  r.add<std::string>("model.init_from", FIELD(model.init_from), "", "Initial weights: empty for a random init from run.seed, or hf:DIR, a Hugging Face folder (config.json with model.safetensors, or its shards and model.safetensors.index.json). The model's shape comes from config.json, and the tokenizer from DIR/tokenizer.json unless data.tokenizer is set; a resumed run reads its checkpoint instead. See docs/models.md, Starting from a Hugging Face model.", init_source());
  r.add<double>("model.dropout", FIELD(model.dropout), 0.0, "Dropout probability in training, on the attention probabilities and the hidden states where transformers applies hidden_dropout_prob and attention_probs_dropout_prob (bert, vit, t5 as its dropout_rate; other families accept only 0). The masks are keyed by run.seed, the step, the layer and each element's global sample, token and feature, so every layout draws the masks one process draws and a resume is exact. model.init_from takes a folder's dropout unless the recipe sets this; eval and generate compute none.", dropout_probability());
  r.add_text(
      "model.feed_forward", "relu",
      "t5: the feed-forward layer (transformers' feed_forward_proj): relu (T5 v1.0's DenseReluDense, wo(ReLU(x wi))) or gated-gelu (T5 v1.1's, wo(GELU_tanh(x wi_0) * (x wi_1))). T5 v1.1 also has its own output projection: model.tie_embeddings false. Other families accept only relu; model.init_from takes a folder's.",
      [check = one_of({"relu", "gated-gelu"})](const std::string& text, Recipe& recipe) -> std::optional<std::string> {
        if (auto problem = check(text)) return problem;
        recipe.model.encoder_decoder.gated_gelu = text == "gated-gelu";
        return std::nullopt;
      },
      [](const Recipe& recipe) -> std::string { return recipe.model.encoder_decoder.gated_gelu ? "gated-gelu" : "relu"; });
  r.add<int64_t>("model.num_decoder_layers", FIELD(model.encoder_decoder.decoder_layers), 0, "t5: blocks of the decoder (transformers' num_decoder_layers); 0 means model.num_layers, the encoder's. Other families accept only 0.", in_range<int64_t>(0, 4096));
  r.add<int64_t>("model.relative_buckets", FIELD(model.encoder_decoder.relative_buckets), 32, "t5: buckets of each stack's relative-position bias (transformers' relative_attention_num_buckets): the encoder's give half to each direction, and of each half, half are exact offsets and the rest logarithmically wider up to model.relative_max_distance. Other families accept only 32.", in_range<int64_t>(4, 4096));
  r.add<int64_t>("model.relative_max_distance", FIELD(model.encoder_decoder.relative_max_distance), 128, "t5: the offset from which all offsets share the last bucket (transformers' relative_attention_max_distance); more than a quarter of model.relative_buckets. Other families accept only 128.", in_range<int64_t>(2, int64_t{1} << 20));
  r.add<std::vector<std::string>>("model.freeze", FIELD(model.freeze), {}, "Parts of the model that do not train: they get no gradients and no optimizer state, and stay bit-identical (llava: any of vision_tower, projector, language_model). Freezing all but the projector is llava's alignment stage.");
  r.add<int64_t>("model.lora.rank", FIELD(model.lora.rank), 8, "LoRA: the rank r of each adapter (A is [r, in], B is [out, r]); with model.lora.targets.", at_least<int64_t>(1));
  r.add<double>("model.lora.alpha", FIELD(model.lora.alpha), 16.0, "LoRA: the adapters' output is scaled by alpha / rank (PEFT's lora_alpha).", positive());
  r.add<double>("model.lora.dropout", FIELD(model.lora.dropout), 0.0, "LoRA: dropout probability on each adapter's input in training (PEFT's lora_dropout): dropout(x) A^T B^T. The masks are keyed like model.dropout's (run.seed, the step, the layer, the module and each element's global sample, token and feature), so every layout draws the masks one process draws and a resume is exact; eval and generate compute none. Not with data.objective dpo or grpo.", dropout_probability());
  r.add<std::vector<std::string>>("model.lora.targets", FIELD(model.lora.targets), {}, "LoRA: the linear layers that get adapters, by module name (llama, qwen2, qwen3: any of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj; qwen3_moe, mixtral, gpt_oss: the attention's q_proj, k_proj, v_proj, o_proj; deepseek_v3: latent attention's q_a_proj and q_b_proj (q_proj without model.q_lora_rank), kv_a_proj_with_mqa, kv_b_proj, o_proj). Empty: no adapters. With any, every base weight is frozen and only the adapters train and hold optimizer state; see docs/post-training.md.");
}

void add_data_options(OptionRegistry& r) {
  r.add_sources("data.train", FIELD(data.train), "builtin:demo", "Training data: builtin:demo, a text file, a folder of text files, a .jsonl file (records with \"text\", or chat \"messages\"), megatron:PREFIX (an indexed dataset), or a blend [{path: SOURCE, weight: W}, ...]; see docs/data.md.", not_empty());
  r.add_sources("data.eval", FIELD(data.eval), "", "Evaluation data, same forms as data.train; empty means none.");
  r.add<std::string>("data.tokenizer", FIELD(data.tokenizer), "byte", "Tokenizer: byte (UTF-8 bytes plus an end-of-text token), sentencepiece:MODEL, tiktoken:RANKS[:ENCODING] or hf:TOKENIZER_JSON; see docs/data.md, Tokenizers.", not_empty());
  r.add<std::string>("data.chat_template", FIELD(data.chat_template), "chatml", "How chat records are written: chatml, llama3, or ROLE=PREFIX{content}SUFFIX entries separated by ;. The loss is on the assistant's turns only; see docs/data.md.", chat_template());
  add_choice<Objective>(r, "data.objective", FIELD(data.objective), Objective::clm, "What the model learns: clm (each token predicts the next; decoders), mlm (masked tokens are recovered from both sides; model.family bert; see docs/models.md, Masked-language models), span_corruption (T5's denoising: spans of data.noise_density of the tokens, data.mean_noise_span_length long on average, are replaced by sentinels in the encoder's input and the decoder predicts them; model.family t5; see docs/models.md, Encoder-decoder (T5)), dpo (direct preference optimization on a .jsonl file of prompt/chosen/rejected records against a frozen reference model; see docs/post-training.md) or grpo (group relative policy optimization on a .jsonl file of prompt/answer records: completions sampled from the policy, scored by grpo.rewards; see docs/post-training.md).");
  r.add<double>("data.noise_density", FIELD(data.noise_density), 0.15, "span_corruption: the share of each sample's tokens that are noise, replaced in the encoder's input by one sentinel id a span and predicted by the decoder (T5's noise_density).", in_range(0.0, 1.0));
  r.add<double>("data.mean_noise_span_length", FIELD(data.mean_noise_span_length), 3.0, "span_corruption: the mean length of a noise span (T5's mean_noise_span_length).", at_least<double>(1.0));
  r.add<double>("data.mlm_probability", FIELD(data.mlm_probability), 0.15, "mlm: the share of ordinary tokens chosen per sample; of them 80% become [MASK], 10% a random token and 10% stay, and only they carry a loss.", in_range(0.0, 1.0));
  r.add<int64_t>("data.seq_len", FIELD(data.seq_len), 256, "Tokens per training sequence.", at_least<int64_t>(2));
  r.add<bool>("data.shuffle", FIELD(data.shuffle), true, "Shuffle samples each epoch (seeded by run.seed).");
  r.add<bool>("data.pack", FIELD(data.pack), false, "Keep packed documents apart: positions restart and attention stops at each document boundary, and no token predicts the next document; off, documents joined by EOS attend across it.");
  r.add<int64_t>("data.balance_window", FIELD(data.balance_window), 0, "Balance attention cost across data-parallel ranks over windows of N steps (0: off); see docs/data.md.", at_least<int64_t>(0));
  r.add<int64_t>("data.prefetch", FIELD(data.prefetch), 2, "Steps of micro batches a background thread reads ahead of training.", at_least<int64_t>(1));
  r.add<bool>("data.skip_bad_images", FIELD(data.skip_bad_images), false, "Image chat (llava): leave out, and count, the records whose images are missing or do not decode; off, such a record stops the run before its first step, named with its file and line.");
  r.add<Floats>("data.crop_scale", FIELD(data.crop_scale), Floats{}, "Image classifiers (vit), training images only: crop a random box of this share [min, max] of the image's area (torchvision's RandomResizedCrop scale; [0.08, 1.0] is its default) and aspect ratio in data.crop_ratio, then resize it to the model's size; empty: the whole image, resized. Drawn per sample from (run.seed, sample), the same on every layout and resume. See docs/models.md, Image classification.", [](const Floats& pair) -> std::optional<std::string> {
    if (pair.empty()) return std::nullopt;
    return increasing_pair(0.0, 1.0, "the image's area")(pair);
  });
  r.add<Floats>("data.crop_ratio", FIELD(data.crop_ratio), Floats{0.75, 4.0 / 3.0}, "With data.crop_scale: the range of the crop's width / height, drawn log-uniformly (torchvision's RandomResizedCrop ratio).", increasing_pair(0.0, 1e9, "width / height"));
  r.add<double>("data.hflip", FIELD(data.hflip), 0.0, "Image classifiers (vit), training images only: the probability that an image is mirrored left to right (torchvision's RandomHorizontalFlip p; 0.5 is usual), after any crop.", in_range(0.0, 1.0));
  r.add<std::string>("data.cache_dir", FIELD(data.cache_dir), "", "Keep tokenized text sources in this folder as memory-mapped entries keyed by the sources' content, the tokenizer, the chat template, the objective and data.seq_len, so that later runs, restarts and the other ranks read them instead of tokenizing again; empty: tokenize on every start. See docs/data.md, The data cache.");
}

void add_dpo_options(OptionRegistry& r) {
  r.add<double>("dpo.beta", FIELD(dpo.beta), 0.1, "data.objective dpo: how far the policy may move from the reference (TRL's beta; for ipo, the regularization tau).", positive());
  add_choice<DpoLoss>(r, "dpo.loss", FIELD(dpo.loss), DpoLoss::sigmoid, "data.objective dpo: sigmoid (DPO's -log sigmoid(beta x the chosen minus the rejected log-ratio)) or ipo (the squared distance of the per-token log-ratio difference from 1 / (2 beta)), as TRL's DPOTrainer computes them.");
  r.add<double>("dpo.label_smoothing", FIELD(dpo.label_smoothing), 0.0, "data.objective dpo, sigmoid: the assumed share of flipped preference labels e (conservative DPO: (1 - e) x the loss of the pair plus e x the loss of the pair swapped); 0 is plain DPO.", in_range(0.0, 0.5));
  r.add<std::string>("dpo.reference", FIELD(dpo.reference), "", "data.objective dpo: the frozen reference model: empty for the policy's initial weights (model.init_from, or run.seed's init), or hf:DIR, a Hugging Face folder of the same shape.", init_source());
}

// grpo.rewards: names of GrpoReward, each once.
Check<std::vector<std::string>> reward_list() {
  return [](const std::vector<std::string>& names) -> std::optional<std::string> {
    const auto check = one_of(util::choice_names<GrpoReward>());
    for (size_t i = 0; i < names.size(); ++i) {
      if (auto problem = check(names[i])) return problem;
      const auto here = names.begin() + static_cast<std::ptrdiff_t>(i);
      if (std::find(names.begin(), here, names[i]) != here)
        return fmt::format("'{}' is listed twice: list each reward once and weigh it with grpo.reward_weights",
                           names[i]);
    }
    return std::nullopt;
  };
}

void add_grpo_options(OptionRegistry& r) {
  r.add<int64_t>("grpo.num_generations", FIELD(grpo.num_generations), 8, "data.objective grpo: completions sampled per prompt, the group whose rewards each advantage is measured against (TRL's num_generations, G).", at_least<int64_t>(2));
  r.add<int64_t>("grpo.max_new_tokens", FIELD(grpo.max_new_tokens), 128, "data.objective grpo: most tokens a completion may have (TRL's max_completion_length, whose default is 256); a prompt takes at most data.seq_len less this.", at_least<int64_t>(1));
  r.add<double>("grpo.temperature", FIELD(grpo.temperature), 1.0, "data.objective grpo: the sampling temperature of the rollouts.", positive());
  r.add<double>("grpo.top_p", FIELD(grpo.top_p), 1.0, "data.objective grpo: nucleus sampling, the smallest set of tokens whose probabilities reach this (1: all).", in_range(1e-6, 1.0));
  r.add<int64_t>("grpo.top_k", FIELD(grpo.top_k), 0, "data.objective grpo: sample among the k likeliest tokens only (0: all).", at_least<int64_t>(0));
  r.add<double>("grpo.beta", FIELD(grpo.beta), 0.0, "data.objective grpo: the weight of the k3 KL to the reference model, the policy's initial weights (0: no reference is kept).", at_least(0.0));
  r.add<double>("grpo.epsilon", FIELD(grpo.epsilon), 0.2, "data.objective grpo: the ratio to the rollout's policy is clipped below at 1 - epsilon (and above at 1 + grpo.epsilon_high).", in_range(0.0, 1.0));
  r.add<double>("grpo.epsilon_high", FIELD(grpo.epsilon_high), 0.0, "data.objective grpo: the upper clip 1 + epsilon_high (DAPO's clip-higher, 0.28 in its paper); 0 means grpo.epsilon.", in_range(0.0, 10.0));
  add_choice<GrpoLoss>(r, "grpo.loss_type", FIELD(grpo.loss_type), GrpoLoss::dapo, "data.objective grpo: how the tokens' losses are averaged, as TRL's loss_type: grpo (each completion's token mean, then the mean over completions), bnpo (the micro batch's token mean), dr_grpo (the token sum over completions x grpo.max_new_tokens) or dapo (the token mean over the whole optimizer step).");
  add_choice<GrpoRewardScaling>(r, "grpo.scale_rewards", FIELD(grpo.scale_rewards), GrpoRewardScaling::group, "data.objective grpo: the advantage is the reward less its group's mean, divided by the group's std (group), the rollout batch's (batch) or nothing (none; Dr. GRPO).");
  add_choice<GrpoRatioLevel>(r, "grpo.importance_sampling_level", FIELD(grpo.importance_sampling_level), GrpoRatioLevel::token, "data.objective grpo: a ratio to the rollout's policy per token (token), or one per completion from its mean log-ratio (sequence; GSPO).");
  r.add<int64_t>("grpo.steps_per_rollout", FIELD(grpo.steps_per_rollout), 1, "data.objective grpo: optimizer steps one rollout batch feeds (TRL's steps_per_generation): each rollout samples steps_per_rollout x train.global_batch_size completions, grpo.num_generations a prompt.", at_least<int64_t>(1));
  r.add<int64_t>("grpo.iterations", FIELD(grpo.iterations), 1, "data.objective grpo: passes over each rollout batch before the next is sampled (TRL's num_iterations); above 1 the ratio to the rollout's policy moves from 1 and clipping matters.", at_least<int64_t>(1));
  r.add<std::vector<std::string>>("grpo.rewards", FIELD(grpo.rewards), {}, "data.objective grpo: the rewards summed into each completion's reward: exact_match (the trimmed completion equals the record's answer), number_match (its last number equals the answer's), format (grpo.reward.format matches at its start), overlong (DAPO's soft overlong punishment, grpo.reward.overlong_cache), command (grpo.reward.command's number). See docs/post-training.md.", reward_list());
  r.add<Floats>("grpo.reward_weights", FIELD(grpo.reward_weights), Floats{}, "data.objective grpo: one weight per entry of grpo.rewards, in its order (TRL's reward_weights); empty: 1 each.");
  r.add<std::string>("grpo.reward.format", FIELD(grpo.reward.format), "", "data.objective grpo, reward format: a regular expression (Python's re dialect, DOTALL and MULTILINE, as TRL's think_format_reward) that a completion must match from its start to score 1; end it with $ for the whole completion.");
  r.add<int64_t>("grpo.reward.overlong_cache", FIELD(grpo.reward.overlong_cache), 0, "data.objective grpo, reward overlong: completions longer than grpo.max_new_tokens less this many tokens score from 0 down to -1 at grpo.max_new_tokens (DAPO's soft overlong punishment).", at_least<int64_t>(0));
  r.add<std::string>("grpo.reward.command", FIELD(grpo.reward.command), "", "data.objective grpo, reward command: a program run by /bin/sh -c on every rollout batch, that reads one {\"prompt\", \"completion\", \"answer\"} JSON line per completion on stdin and writes one number a line on stdout.");
  r.add<double>("grpo.reward.timeout_s", FIELD(grpo.reward.timeout_s), 60.0, "data.objective grpo, reward command: seconds one call may take; past them it and its process group are killed and the run stops with exit 2.", positive());
}

void add_train_options(OptionRegistry& r) {
  r.add<int64_t>("train.steps", FIELD(train.steps), 1000, "Optimizer steps.", at_least<int64_t>(1));
  r.add<int64_t>("train.global_batch_size", FIELD(train.global_batch_size), 8, "Sequences per optimizer step, over all ranks.", at_least<int64_t>(1));
  r.add<int64_t>("train.micro_batch_size", FIELD(train.micro_batch_size), 8, "Sequences per forward/backward pass; the rest is gradient accumulation.", at_least<int64_t>(1));
  add_choice<Dtype>(r, "train.dtype", FIELD(train.dtype), Dtype::fp32, "Compute dtype: fp32; bf16 (autocast, fp32 master weights and optimizer state; on CPUs without AVX-512 each GEMM multiplies the bf16 operands in fp32 and rounds once); or fp16 (fp32 master weights, dynamic loss scaling; on CPU emulated by fp16 rounding around fp32 matmuls).");
  r.add<int64_t>("train.log_every", FIELD(train.log_every), 10, "Print a progress line every N steps.", at_least<int64_t>(1));
  r.add<int64_t>("train.eval_every", FIELD(train.eval_every), 0, "Evaluate on data.eval every N steps; 0 means only at the end (if data.eval is set).", at_least<int64_t>(0));
  r.add<int64_t>("train.eval_batches", FIELD(train.eval_batches), 16, "Micro batches per evaluation; 0 means the whole eval set.", at_least<int64_t>(0));
  r.add<bool>("train.eval_at_start", FIELD(train.eval_at_start), false, "Also evaluate on data.eval before the first step of a fresh run: the loss of the initial (or imported) weights.");
  add_choice<util::DeviceSetting>(r, "train.device", FIELD(train.device), util::DeviceSetting::automatic, "Where to train: cpu, cuda (the GPU LOCAL_RANK names; an error without one), or auto (cuda when a device is there and CUDA was compiled in, else cpu).");
  add_choice<OmpWaitPolicy>(r, "train.omp_wait_policy", FIELD(train.omp_wait_policy), OmpWaitPolicy::automatic, "How idle OpenMP threads wait: passive (sleep at once), active (spin), or auto/default (libgomp's default, as in PyTorch: spin briefly, then sleep). OMP_WAIT_POLICY in the environment overrides it.");
  r.add<int64_t>("train.threads", FIELD(train.threads), 0, "Intra-op CPU threads; 0 means the cores divided among the ranks on this machine (or OMP_NUM_THREADS when set). At most 4 x the machine's cores.", thread_count());
  r.add<int64_t>("train.max_skipped_steps", FIELD(train.max_skipped_steps), 5, "A step whose loss or gradient norm is not finite is skipped (no update); after this many in a row the run stops with exit 1.", at_least<int64_t>(1));
  add_choice<Spike>(r, "train.spike", FIELD(train.spike), Spike::off, "What a loss spike does (a loss or gradient norm more than train.spike_zscore standard deviations above the mean of the last train.spike_window steps): off (nothing), skip (no update for that step), or rollback (reload the last checkpoint and skip the data of the steps since it). After train.max_skipped_steps skips in a row, or as many rollbacks to the same checkpoint, the run stops with exit 1.");
  r.add<int64_t>("train.spike_window", FIELD(train.spike_window), 50, "Applied steps whose loss and gradient norm make the mean and standard deviation a spike is measured against; detection starts once the window is full.", at_least<int64_t>(2));
  r.add<double>("train.spike_zscore", FIELD(train.spike_zscore), 6.0, "How many standard deviations above the window's mean a spike is (the deviation taken as at least 1% of the mean).", positive());
  r.add<std::string>("train.stop_signals", FIELD(train.stop_signals), "TERM,INT,USR1,HUP", "Signals that stop the run cleanly: every rank saves a checkpoint at the same step and exits with code 75 (resumable); HUP is a lost terminal or ssh session. Comma-separated, from TERM, INT, USR1, USR2, HUP; empty for none.", signal_list());
}

void add_optim_options(OptionRegistry& r) {
  add_choice<Optimizer>(r, "optim.name", FIELD(optim.name), Optimizer::adamw, "Optimizer: adamw; or onebit_adam (1-bit Adam: AdamW for optim.freeze_step steps, then the variance frozen and the momentum averaged over the data-parallel replicas as signs and a scale per chunk, with error feedback: about 1/32 of AdamW's gradient traffic; DDP and HSDP only, docs/distributed.md); or muon (Muon: momentum orthogonalised by Newton-Schulz for the hidden weight matrices, AdamW for the embeddings, head, norms, biases and routers; optim.muon.*, docs/recipes.md \"Muon\").");
  r.add<int64_t>("optim.freeze_step", FIELD(optim.freeze_step), 100, "onebit_adam: steps of plain AdamW (gradients all-reduced) before the variance freezes and the compressed momentum exchange starts. The paper warms up for 15-25% of the run; the variance must have settled.", at_least<int64_t>(1));
  r.add<double>("optim.muon.momentum", FIELD(optim.muon.momentum), 0.95, "muon: momentum of the matrices' gradient buffer (torch.optim.Muon's momentum).", in_range(0.0, 0.999999));
  r.add<bool>("optim.muon.nesterov", FIELD(optim.muon.nesterov), true, "muon: orthogonalize the Nesterov look-ahead grad.lerp(buffer, momentum) rather than the buffer itself.");
  r.add<int64_t>("optim.muon.ns_steps", FIELD(optim.muon.ns_steps), 5, "muon: quintic Newton-Schulz iterations (coefficients 3.4445, -4.7750, 2.0315; in optim.muon.ns_dtype).", in_range<int64_t>(1, 100));
  add_choice<MuonAdjustLr>(r, "optim.muon.adjust_lr", FIELD(optim.muon.adjust_lr), MuonAdjustLr::original, "muon: the shape scale of a [A x B] matrix's update: original (Keller Jordan's sqrt(max(1, A/B))) or match_rms_adamw (Moonlight's 0.2 sqrt(max(A, B)), so that optim.lr and AdamW's lr can be the same).");
  add_choice<MuonNsDtype>(r, "optim.muon.ns_dtype", FIELD(optim.muon.ns_dtype), MuonNsDtype::bf16, "muon: the precision of the Newton-Schulz iteration: bf16 (torch.optim.Muon's and the published recipes') or fp32. In bf16 a gradient that differs in its last bit (another layout's reduction order) can round differently and move the update by a bf16 step; fp32 keeps layouts within 1e-5 of each other (docs/recipes.md \"Muon\").");
  r.add<double>("optim.muon.adamw_lr", FIELD(optim.muon.adamw_lr), 0.0, "muon: peak learning rate of the parameters that take AdamW (embeddings, the output head, norms, biases, routers; optim.betas, optim.eps, optim.weight_decay); 0 means optim.lr. It follows optim.lr's schedule.", at_least(0.0));
  r.add<double>("optim.muon.qk_clip_tau", FIELD(optim.muon.qk_clip_tau), 0.0, "muon: QK-clip (Kimi K2's MuonClip): after each step, every attention head whose largest pre-softmax logit (q.k times the softmax scale) over the step's batch exceeded this has its query and key projections scaled by sqrt(tau / logit), a shared key head (grouped-query attention) by the smallest factor of its query heads; 0 turns it off. Needs memory.attention naive (the logits are read from its scores) and attention with per-head q and k projections and no q/k norm; not under parallel.tp, pp or cp. metrics.jsonl: qk_clip/heads, qk_clip/max_logit.", at_least(0.0));
  r.add<double>("optim.lr", FIELD(optim.lr), 3e-4, "Peak learning rate.", positive());
  r.add<double>("optim.min_lr", FIELD(optim.min_lr), 0.0, "Learning rate at the end of the decay.", at_least(0.0));
  r.add<int64_t>("optim.warmup_steps", FIELD(optim.warmup_steps), 0, "Linear warmup steps from 0 to optim.lr. Longer than train.steps (a smoke run of a real recipe) trains with a warning: the schedule, cut short, never decays.", at_least<int64_t>(0));
  add_choice<LrDecay>(r, "optim.schedule", FIELD(optim.schedule), LrDecay::cosine, "Decay after warmup: cosine, linear or constant.");
  r.add<Floats>("optim.betas", FIELD(optim.betas), Floats{0.9, 0.95}, "AdamW betas [beta1, beta2].", adam_betas());
  r.add<double>("optim.eps", FIELD(optim.eps), 1e-8, "AdamW epsilon.", positive());
  r.add<double>("optim.weight_decay", FIELD(optim.weight_decay), 0.1, "Decoupled weight decay on matrices (not on norms, biases).", at_least(0.0));
  r.add<double>("optim.grad_clip", FIELD(optim.grad_clip), 1.0, "Clip the global gradient norm to this; 0 disables clipping.", at_least(0.0));
}

void add_memory_options(OptionRegistry& r) {
  r.add<std::string>("memory.chunked_loss", FIELD(memory.chunked_loss), "auto", "Output projection + cross-entropy in chunks of tokens so the [tokens x vocab] logits never exist: auto (chunk from a 256 MiB budget), off, or tokens per chunk.", chunk_spec());
  add_choice<memory::Attention>(r, "memory.attention", FIELD(memory.attention), memory::Attention::automatic, "Attention kernel: naive ([T x T] scores), blockwise (online softmax, memory linear in T), sdpa (LibTorch's fused scaled_dot_product_attention; packed rows take the varlen flash kernel on CUDA in bf16/fp16 and the blockwise one elsewhere), or auto (sdpa, except packed rows where varlen is not available: naive up to 2048 tokens, blockwise above).");
  r.add<int64_t>("memory.attention_block_size", FIELD(memory.attention_block_size), 256, "Query/key tile size of blockwise attention.", at_least<int64_t>(1));
  add_choice<memory::Recompute>(r, "memory.recompute", FIELD(memory.recompute), memory::Recompute::none, "Activation recompute: none, full (whole blocks) or selective (the attention kernel only).");
  r.add<double>("memory.recompute_ratio", FIELD(memory.recompute_ratio), 1.0, "Fraction of the blocks (the first ones) that recompute.", in_range(0.0, 1.0));
  r.add<double>("memory.vision_recompute_ratio", FIELD(memory.vision_recompute_ratio), 1.0, "llava: fraction of the vision tower's blocks (the first ones) that recompute under memory.recompute; recompute_ratio then counts the language model's blocks.", in_range(0.0, 1.0));
  r.add<bool>("memory.offload_activations", FIELD(memory.offload_activations), false, "Keep the block inputs that full recompute needs in host memory until backward.");
  add_choice<memory::FusedKernels>(r, "memory.fused_kernels", FIELD(memory.fused_kernels), memory::FusedKernels::automatic, "Fused kernels in place of chains of elementwise ops (RMSNorm, add + RMSNorm, SwiGLU, rotary, AdamW; fp32 on the CPU, fp32/bf16/fp16 on CUDA): auto (wherever one exists), on (the same, refusing a dtype or device that has none), off (the unfused ops).");
}

void add_precision_options(OptionRegistry& r) {
  r.add<double>("precision.loss_scale_initial", FIELD(precision.loss_scale_initial), 65536.0, "fp16: the first loss scale; halved on every step whose gradients overflow (that step is skipped).", positive());
  r.add<int64_t>("precision.loss_scale_growth_interval", FIELD(precision.loss_scale_growth_interval), 2000, "fp16: double the loss scale after this many steps in a row without overflow.", at_least<int64_t>(1));
  add_choice<model::Float8Scaling>(r, "precision.fp8", FIELD(precision.fp8), model::Float8Scaling::off, "FP8 GEMMs in the linear layers and experts (not the embedding, output head, router or norms), scales from the current amax: off; tensorwise (one scale per tensor); rowwise (per row of the input, per output row of the weight, power-of-two scales, e4m3 gradients: torchao's rowwise recipe); rowwise_with_gw_hp (torchao's recipe of that name: rowwise, but the weight is scaled as a whole for the input gradient and the weight gradient is computed unquantized, its most accurate); blockwise (DeepSeek-V3's 1x128 activation tiles and 128x128 weight blocks). Master weights and optimizer state stay fp32.");
  add_choice<Float8GradFormat>(r, "precision.fp8_grad", FIELD(precision.fp8_grad), Float8GradFormat::automatic, "Format of the output gradients under precision.fp8: e4m3, e5m2, or auto (e5m2 for tensorwise as torchao's default, e4m3 for rowwise, rowwise_with_gw_hp and blockwise as torchao's rowwise recipes and DeepSeek-V3; rowwise on a model with experts warns at start-up, as e5m2 converges closer to bf16 there).");
  add_choice<Float8AllGather>(r, "precision.fp8_all_gather", FIELD(precision.fp8_all_gather), Float8AllGather::automatic, "FSDP units gather their FP8 weights as fp8 bytes plus scales (scales from the whole tensor's amax, one collective per unit): auto (with tensorwise and blockwise scaling, when parallel.fsdp > 1), on (the same, refusing rowwise and rowwise_with_gw_hp, whose weight is quantized twice), off.");
}

void add_parallel_and_dist_options(OptionRegistry& r) {
  r.add<int64_t>("parallel.dp", FIELD(parallel.dp), 1, "Data-parallel replicas (DDP, or the replica dimension of HSDP); -1 means the ranks left over.", degree());
  r.add<int64_t>("parallel.fsdp", FIELD(parallel.fsdp), -1, "Ranks that shard parameters, gradients and optimizer state (FSDP); -1 means the ranks left over.", degree());
  r.add<int64_t>("parallel.cp", FIELD(parallel.cp), 1, "Context-parallel degree: each sequence is split over cp ranks (head-tail: rank r holds chunks r and 2cp-1-r of 2cp), which hold different tokens of the same samples; FSDP shards over fsdp x cp. Between fsdp and tp in the mesh. Decoder families only.", degree());
  add_choice<parallel::ContextKind>(r, "parallel.cp_kind", FIELD(parallel.cp_kind), parallel::ContextKind::ring, "How attention sees the rest of the sequence under parallel.cp > 1: ring (k/v blocks passed around the cp ranks, overlapped with attention; data.seq_len must divide by 2 x cp) or ulysses (an all-to-all to whole sequences of 1/cp of the heads; the heads per tensor-parallel rank must divide by cp).");
  r.add<bool>("parallel.cp_balance", FIELD(parallel.cp_balance), true, "With parallel.cp > 1 and packed documents: deal finer chunks of each packed row to the cp ranks so that their causal attention work is even, where that beats the head-tail split.");
  r.add<int64_t>("parallel.tp", FIELD(parallel.tp), 1, "Tensor-parallel degree (Megatron's split: attention by heads, the MLP by its width, a MoE layer's experts by expert with the router replicated, the embedding and the output projection by vocabulary rows, the loss vocabulary-parallel). Innermost in the mesh: tp ranks are consecutive.", degree());
  r.add<bool>("parallel.sequence_parallel", FIELD(parallel.sequence_parallel), false, "With parallel.tp > 1: activations between the tensor-parallel layers (norms, residuals) are split along the sequence, all-gathered before and reduce-scattered after them; data.seq_len must divide by tp.");
  r.add<int64_t>("parallel.pp", FIELD(parallel.pp), 1, "Pipeline-parallel stages: contiguous layers, the embedding and the output head counting as one layer each for balance. Outermost in the mesh.", degree());
  add_choice<PpSchedule>(r, "parallel.pp_schedule", FIELD(parallel.pp_schedule), PpSchedule::one_f_one_b, "Pipeline schedule: gpipe (every forward, then every backward), 1f1b (pp - stage - 1 warm-up forwards, then one forward and one backward in turn), interleaved_1f1b (parallel.pp_virtual_stages chunks per rank, Megatron's warm-up), zb_h1 (zero bubble: 1f1b's warm-up with each backward split into the input gradient, sent upstream at once, and the weight gradients, deferred into the bubble), zbv (zero bubble in a V: parallel.pp_virtual_stages 2, rank r runs chunks r and 2 pp - 1 - r, so the first rank holds the embedding and the head; PyTorch's ScheduleZBVZeroBubble order), dualpipev (DeepSeek's DualPipe in the same V, PyTorch's ScheduleDualPipeV order: a forward of one chunk paired with a whole backward of the other in the steady state, run one after the other; needs at least 2 pp micro batches a step).");
  r.add<int64_t>("parallel.pp_virtual_stages", FIELD(parallel.pp_virtual_stages), 1, "Model chunks per pipeline rank: for interleaved_1f1b (Megatron's virtual pipeline size), 2 for zbv and dualpipev; 1 otherwise.", in_range<int64_t>(1, 64));
  r.add<std::vector<int64_t>>("parallel.pp_layers", FIELD(parallel.pp_layers), std::vector<int64_t>{}, "With parallel.pp > 1: how many of the model's layers each pipeline chunk holds, in the model's order (pp x pp_virtual_stages counts, adding up to its layers; t5's encoder then decoder blocks), the first chunk also running the embedding and the last the head (and multi-token prediction's depths); as Megatron's decoder-first/last-pipeline-num-layers and torchtitan's first/last_stage_less_layers, e.g. [3, 4, 4, 3] for 14 layers on 4 stages. Empty: the balanced cut, the embedding and the head counting as a layer each. See docs/distributed.md, Pipeline parallelism.");
  r.add<int64_t>("parallel.ep", FIELD(parallel.ep), 1, "Expert-parallel degree, folded into the data ranks: it must divide dp x fsdp. Each MoE layer's experts (under parallel.tp, each tensor-parallel rank's E / tp) are split over ep ranks and sharded over the other dp x fsdp / ep.", degree());
  r.add<int64_t>("parallel.intra_layer_micro_batch", FIELD(parallel.intra_layer_micro_batch), 1, "Domino-EP: each MoE layer cuts a micro batch's tokens into this many parts whose expert all-to-alls overlap each other's expert compute (needs parallel.ep > 1; results equal 1).", in_range<int64_t>(1, 64));
  r.add<bool>("parallel.reshard_after_forward", FIELD(parallel.reshard_after_forward), true, "FSDP: free each block's gathered parameters after its forward and gather them again for backward (less memory, one more all-gather per block).");
  r.add<double>("dist.timeout_s", FIELD(dist.timeout_s), 600.0, "Seconds a collective may take before the job ends with an error naming it (a dead or stalled rank).", positive());
  r.add<double>("dist.init_timeout_s", FIELD(dist.init_timeout_s), 300.0, "Seconds to wait at start for every rank to join; the error names the ranks that never arrived.", positive());
  r.add<double>("dist.watchdog_s", FIELD(dist.watchdog_s), 1800.0, "End the job when a rank completes no step for this many seconds (a hang outside any collective), after printing every rank's last step and collective; 0 turns the watchdog off.", at_least(0.0));
  r.add<std::string>("dist.health_check", FIELD(dist.health_check), "off", "Check every rank and link (xtrain health: a seeded matmul chain every healthy rank reproduces bit for bit, the matmul rate, the collectives of each mesh group): off, start (before the first step) or every_N (also after every N steps). A rank with another result, or slower than the median by dist.health_slow_fraction, is named; dist.health_action says what follows.", health_schedule());
  add_choice<HealthAction>(r, "dist.health_action", FIELD(dist.health_action), HealthAction::stop, "When a health check names a rank: stop (the run ends with the check's message) or warn (it goes on).");
  r.add<double>("dist.health_slow_fraction", FIELD(dist.health_slow_fraction), 0.25, "A rank whose matmul rate is below the median by more than this share is slow (health checks); during training, a rank slowest in most of the last 20 steps, by more than this share over the mean, is warned of.", in_range(0.0, 1.0));
  add_choice<Backend>(r, "dist.backend", FIELD(dist.backend), Backend::automatic, "Collective backend: gloo, nccl (CUDA only), or auto (nccl on cuda, gloo on cpu).");
}

void add_checkpoint_options(OptionRegistry& r) {
  r.add<int64_t>("checkpoint.every", FIELD(checkpoint.every), 0, "Save every N steps; 0 means only at the end (and on --stop-at-step, a stop signal or a STOP file).", at_least<int64_t>(0));
  r.add<int64_t>("checkpoint.keep", FIELD(checkpoint.keep), 3, "Keep the last N checkpoints; the newest, verified as it is written, is never removed.", at_least<int64_t>(1));
  add_resume(r, "auto (continue from checkpoints/latest, or from the newest checkpoint that verifies when latest is damaged), strict (the same, but a damaged latest stops the run with exit 2), never, or a checkpoint folder.");
  r.add<bool>("checkpoint.async", FIELD(checkpoint.async), false, "Write checkpoints in the background: the state is copied to host memory at the step boundary, then written, fsynced and committed while training goes on (one save at a time; a crash during the write leaves latest on the previous checkpoint).");
  r.add<bool>("checkpoint.at_start", FIELD(checkpoint.at_start), false, "Also save the initial weights as checkpoints/step-0 before the first step of a fresh run: the seed every layout starts from (they are bit-identical across layouts), or the imported weights as xtrain holds them.");
  r.add<bool>("checkpoint.in_memory", FIELD(checkpoint.in_memory), false, "Also keep the newest checkpoint in host memory on every node (a tmpfs folder: $XTRAIN_NODE_MEMORY_DIR, else /dev/shm/xtrain-<hash of run.dir>), each rank's files with a copy on the next node; a restart then reads the checkpoint checkpoints/latest names from the nodes' memory, fetching a lost node's files from their copy, instead of from run.dir (falling back to run.dir when a copy does not verify).");
}

// The keys in documentation order: `xtrain options` and docs/recipes.md list them as declared here.
OptionRegistry build_registry() {
  OptionRegistry r;
  add_run_options(r);
  add_model_options(r);
  add_data_options(r);
  add_dpo_options(r);
  add_grpo_options(r);
  add_train_options(r);
  add_optim_options(r);
  add_memory_options(r);
  add_precision_options(r);
  add_parallel_and_dist_options(r);
  add_checkpoint_options(r);
  return r;
}

#undef FIELD

}  // namespace

const OptionRegistry& OptionRegistry::instance() {
  static const OptionRegistry registry = build_registry();
  return registry;
}

}  // namespace xtrain::config
