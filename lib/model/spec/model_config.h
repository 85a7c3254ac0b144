// ModelConfig: the shape of a model, independent of recipes and parallelism, and the family it
// belongs to (model.family). What a family computes differently (qwen2's q, k and v biases,
// qwen3's q and k norms) is the family's own fact, held by its ModelSpec (model/spec/model_spec.h),
// not by the shape.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "model/spec/moe_choices.h"
#include "util/choice.h"

namespace xtrain::model {

// How rotary wavelengths are stretched for a longer context (transformers' rope_type).
//   llama3  Llama 3's: wavelengths longer than original_max_len / low_freq_factor are
//           stretched by factor, shorter than original_max_len / high_freq_factor kept, and
//           those between blended.
//   yarn    YaRN (Peng et al. 2023): dimensions that turn fewer than beta_slow times over
//           original_max_len are interpolated by factor, those turning more than beta_fast
//           times kept, a linear ramp between; cos and sin are multiplied by attention_factor.
enum class RopeScalingType { llama3, yarn };

XTRAIN_CHOICES_BEGIN
constexpr const char* to_string(RopeScalingType value) {
  switch (value) {
    case RopeScalingType::llama3: return "llama3";
    case RopeScalingType::yarn: return "yarn";
  }
  return nullptr;
}
XTRAIN_CHOICES_END

// factor 0: no scaling.
struct RopeScaling {
  RopeScalingType type = RopeScalingType::llama3;
  double factor = 0;
  int64_t original_max_len = 8192;
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  double beta_fast = 32, beta_slow = 1;  // yarn
  // yarn: cos and sin are multiplied by attention_factor; 0 derives it as transformers does,
  // mscale(factor, mscale) / mscale(factor, mscale_all_dim) when both are set, else
  // mscale(factor, 1), with mscale(s, m) = 0.1 m ln(s) + 1 (1 for s <= 1).
  double attention_factor = 0;
  double mscale = 0, mscale_all_dim = 0;  // 0: not set
  bool truncate = true;  // yarn: the ramp's ends rounded outward to whole dimensions
  bool enabled() const { return factor > 0; }
  bool yarn() const { return enabled() && type == RopeScalingType::yarn; }
  static double yarn_mscale(double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; }
  double yarn_attention_factor() const {
    if (attention_factor > 0) return attention_factor;
    if (mscale > 0 && mscale_all_dim > 0) return yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim);
    return yarn_mscale(factor, 1.0);
  }
  // DeepSeek's softmax scale with YaRN, for heads of `dim` features: 1/sqrt(dim) times
  // mscale(factor, mscale_all_dim)^2 when mscale_all_dim is set (transformers'
  // yarn_apply_mscale, in its order of operations).
  double softmax_scale(int64_t dim) const {
    const double scale = std::pow(static_cast<double>(dim), -0.5);
    if (!yarn() || mscale_all_dim <= 0) return scale;
    const double m = yarn_mscale(factor, mscale_all_dim);
    return scale * m * m;
  }
};

// Multi-head latent attention (DeepSeek-V2/V3, model/deepseek/latent_attention.h): queries through an
// optional low-rank q_lora_rank bottleneck, keys and values through a shared kv_lora_rank latent
// expanded per head; each q and k head is qk_nope_head_dim features without rotation and
// qk_rope_head_dim rotated ones (k's rotated part shared by every head), each v head
// v_head_dim. kv_lora_rank 0: grouped-query attention instead.
struct LatentAttentionConfig {
  int64_t q_lora_rank = 0;  // 0: q_proj straight from the hidden state
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  // The rotated features are stored in interleaved pairs (x0, x1), (x2, x3), ... (DeepSeek's
  // checkpoints, transformers' rope_interleave), not as two halves.
  bool rope_interleave = true;
  bool enabled() const { return kv_lora_rank > 0; }
  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
};

// The vision side of a vision-language model (llava, model/llava/llava.h): a CLIP ViT (model/clip/clip_vision.h)
// and how its features enter the text. num_layers 0: a text-only model.
struct VisionConfig {
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t intermediate_size = 0;
  int64_t image_size = 0;  // square images of image_size pixels a side
  int64_t patch_size = 0;
  int64_t num_channels = 3;
  double norm_eps = 1e-5;
  double init_std = 0.02;
  int64_t projection_dim = 512;  // CLIP's, kept for config.json only (llava does not use it)
  // The hidden states that become image features: index into [embeddings, layer 1, ..., layer N]
  // (negative from the end, transformers' vision_feature_layer), with the class token dropped
  // ("default") or kept ("full").
  int64_t feature_layer = -2;
  std::string feature_select = "default";
  int64_t image_token_index = 0;  // the placeholder id each image feature replaces
  int64_t image_seq_length = 0;   // placeholders per image (config.json's; the processor's business)

  bool enabled() const { return num_layers > 0; }
  int64_t num_patches() const { return (image_size / patch_size) * (image_size / patch_size); }
  // Encoder layers the selected hidden states pass through.
  int64_t feature_depth() const { return feature_layer < 0 ? num_layers + 1 + feature_layer : feature_layer; }
  int64_t features_per_image() const { return num_patches() + (feature_select == "full" ? 1 : 0); }
};

// Encoder-decoder models (t5, model/t5/t5.h): ModelConfig's num_layers is the encoder's depth.
struct EncoderDecoderConfig {
  int64_t decoder_layers = 0;  // 0: num_layers
  // Each stack's relative-position buckets (T5's relative_attention_num_buckets) and the offset
  // from which all share the last (relative_attention_max_distance).
  int64_t relative_buckets = 32;
  int64_t relative_max_distance = 128;
  // The feed-forward layer: T5 v1.1's gated GELU (tanh), GELU(x wi_0) * (x wi_1), else v1.0's ReLU.
  bool gated_gelu = false;
  int64_t decoder_depth(int64_t num_layers) const { return decoder_layers > 0 ? decoder_layers : num_layers; }
};

// Contrastive image-text models (clip, model/clip/clip.h): ModelConfig's own fields are the text
// tower's, `vision` the image tower's, vision.projection_dim the shared embedding's width.
struct ContrastiveConfig {
  // The text tower reads its pooled state at the first eos_token_id of a row; 2 means the
  // highest id of the row instead (transformers' rule for configs from before its fix).
  int64_t eos_token_id = 2;
  double logit_scale_init = 2.6592;  // log(1 / 0.07), CLIP's temperature at init
};

struct ModelConfig {
  std::string family = "llama";  // a key of the model registry (model/spec/model_spec.h)
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t intermediate_size = 0;
  int64_t max_seq_len = 0;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  double norm_eps = 1e-5;
  bool tie_embeddings = false;
  double init_std = 0.02;
  // model.dropout: the probability of dropout on attention probabilities and hidden states in
  // training (model/layers/keyed_dropout.h), for a family whose spec has capabilities.dropout.
  double dropout = 0;
  int64_t head_dim_override = 0;  // 0: hidden_size / num_heads
  // Sliding-window attention (gpt_oss): the layers whose layer_types entry is
  // "sliding_attention" see only the sliding_window latest keys of their document (the token's
  // own included); "full_attention" layers, and every layer when layer_types is empty, see all.
  int64_t sliding_window = 0;
  std::vector<std::string> layer_types;
  // GPT-OSS's clamped expert activation (MoeOptions::gpt_oss_experts).
  double swiglu_limit = 7.0, swiglu_alpha = 1.702;
  // Encoders (bert): segment embeddings, and the id whose embedding row takes no gradient from
  // the lookup (transformers' padding_idx).
  int64_t type_vocab_size = 2;
  int64_t pad_token_id = 0;
  LatentAttentionConfig latent;  // multi-head latent attention (deepseek_v3)
  VisionConfig vision;  // vision-language models (llava); the fields above are the text model's
  EncoderDecoderConfig encoder_decoder;  // t5
  ContrastiveConfig contrastive;          // clip

  // Mixture of experts (model/layers/moe.h); num_experts 0: every layer dense. Layer i is a MoE layer
  // when i >= first_k_dense and (i + 1) % moe_layer_step == 0 (transformers' mlp_only_layers and
  // decoder_sparse_step); the others keep the dense SwiGLU of intermediate_size.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = true;
  int64_t first_k_dense = 0;
  int64_t moe_layer_step = 1;
  double router_aux_loss_coef = 0.0;  // the load-balancing loss's coefficient
  double router_z_loss_coef = 0.0;
  // layer: each MoE layer's balancing loss, averaged over the layers (Megatron, XTuner); model:
  // one over every layer's routing at once, transformers' load_balancing_loss_func.
  AuxLossScope router_aux_loss_scope = AuxLossScope::layer;
  // The balancing loss's counts are the global batch's (summed over the data ranks), not the
  // rank's micro batch's (CausalLM::sum_over_data_ranks).
  bool router_aux_loss_global_average = false;
  Router router = Router::softmax;
  double router_bias_update_rate = 1e-3;  // sigmoid_bias: the step of the expert bias per update
  int64_t n_group = 1, topk_group = 1;    // group-limited routing (sigmoid_bias)
  double routed_scaling_factor = 1.0;
  int64_t num_shared_experts = 0;        // as one SwiGLU of moe_intermediate_size x this
  bool shared_expert_gate = false;       // sigmoid gate on the shared experts (Qwen2-MoE)
  double capacity_factor = 0.0;          // 0: dropless; else tokens over capacity are dropped
  DropPolicy drop_policy = DropPolicy::probs;  // which of an expert's tokens are dropped

  // Multi-token prediction (DeepSeek-V3): mtp_layers extra depths after the decoder, depth k
  // predicting the token k ahead of the next one (model/llama.h, MtpLayer); their mean loss
  // joins the training loss times mtp_loss_weight. Layers num_layers .. num_layers + mtp_layers - 1.
  int64_t mtp_layers = 0;
  double mtp_loss_weight = 0.1;

  bool is_moe_layer(int64_t layer) const {
    return num_experts > 0 && layer >= first_k_dense && (layer + 1) % moe_layer_step == 0;
  }
  int64_t num_moe_layers() const {
    int64_t count = 0;
    for (int64_t i = 0; i < num_layers; ++i) count += is_moe_layer(i) ? 1 : 0;
    return count;
  }

  int64_t head_dim() const { return head_dim_override > 0 ? head_dim_override : hidden_size / num_heads; }
  // The window of layer `layer`'s attention; 0: the whole document.
  int64_t window_of(int64_t layer) const {
    const auto index = static_cast<size_t>(layer);
    return index < layer_types.size() && layer_types[index] == "sliding_attention" ? sliding_window : 0;
  }
  // The features of a head that rotate: the rotated part of a latent attention head, else all.
  int64_t rotary_dim() const { return latent.enabled() ? latent.qk_rope_head_dim : head_dim(); }
};

}  // namespace xtrain::model
