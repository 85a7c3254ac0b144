#include "optim/muon.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <regex>

#include <fmt/format.h>
#include <torch/torch.h>

#include "util/input_error.h"

namespace xtrain::optim {

namespace {
// Keller Jordan's coefficients and torch.optim.Muon's eps.
constexpr double kA = 3.4445, kB = -4.7750, kC = 2.0315, kEps = 1e-7;
}  // namespace

bool muon_takes(const std::string& name, size_t dims) {
  // Embedding tables (token, position, type), the output head and the multi-token head's, the
  // routers (a gate module's weight) and the shared experts' scalar gate: AdamW, as Keller
  // Jordan's and Moonlight's recipes do.
  static const std::regex adamw_only(
      R"((^|\.)(embed_tokens|lm_head|shared_head|shared_expert_gate|gate)\.|embeddings?\.|(^|\.)wte\.|(^|\.)wpe\.)");
  // Biases, an expert stack's [experts, out] included.
  static const std::regex bias(R"((_bias|\.bias)$)");
  if (std::regex_search(name, adamw_only) || std::regex_search(name, bias)) return false;
  if (dims == 2) return true;
  static const std::regex expert_stack(R"(\.experts\.(gate_up_proj|down_proj)$)");
  return dims == 3 && std::regex_search(name, expert_stack);
}

torch::Tensor newton_schulz(const torch::Tensor& matrix, int64_t steps, torch::ScalarType dtype) {
  TORCH_CHECK(matrix.dim() == 2, "newton_schulz takes a matrix, got ", matrix.dim(), " dimensions");
  const bool tall = matrix.size(0) > matrix.size(1);
  auto x = matrix.to(dtype, /*non_blocking=*/false, /*copy=*/true);  // divided in place below
  if (tall) x = x.t();
  x.div_(x.norm().clamp_min(kEps));
  for (int64_t i = 0; i < steps; ++i) {
    const auto gram = at::mm(x, x.t());
    const auto gram_update = at::addmm(gram, gram, gram, kB, kC);
    x = at::addmm(x, gram_update, x, kA);
  }
  return tall ? x.t() : x;
}

double muon_adjusted_lr(double lr, MuonAdjustLr rule, int64_t rows, int64_t cols) {
  const double a = static_cast<double>(rows), b = static_cast<double>(cols);
  if (rule == MuonAdjustLr::match_rms_adamw) return lr * 0.2 * std::sqrt(std::max(a, b));
  return lr * std::sqrt(std::max(1.0, a / b));
}

namespace {
int64_t numel_of(const std::vector<int64_t>& sizes) {
  return std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<>());
}

// The matrix's box of `whole` (a view).
torch::Tensor box_of(torch::Tensor whole, const MuonMatrix& matrix) {
  for (size_t d = 0; d < matrix.shape.size(); ++d)
    whole = whole.narrow(static_cast<int64_t>(d), matrix.offsets[d], matrix.sizes[d]);
  return whole;
}
}  // namespace

Muon::Muon(std::vector<NamedParameter> adamw_part, std::vector<MuonMatrix> matrices, AdamWOptions adamw_options,
           MuonOptions options)
    : AdamW(std::move(adamw_part), adamw_options), matrices_(std::move(matrices)), muon_options_(options) {
  for (auto& matrix : matrices_) {
    const auto& name = matrix.parameter.name;
    const auto& shape = matrix.shape;
    TORCH_CHECK(shape.size() == 2 || shape.size() == 3, "Muon takes matrices and expert stacks; ", name, " has ",
                shape.size(), " dimensions");
    if (matrix.offsets.empty()) {
      matrix.offsets.assign(shape.size(), 0);
      matrix.sizes = shape;
    }
    TORCH_CHECK(matrix.offsets.size() == shape.size() && matrix.sizes.size() == shape.size(), "Muon: ", name,
                "'s box has ", matrix.sizes.size(), " dimensions, the tensor ", shape.size());
    // Each expert is orthogonalised alone, from the experts its box holds whole.
    TORCH_CHECK(shape.size() == 2 || (matrix.sizes[1] == shape[1] && matrix.sizes[2] == shape[2]), "Muon: ", name,
                "'s box holds parts of experts' matrices, which it does not assemble");
    buffers_.push_back(torch::zeros_like(matrix.parameter.tensor, torch::MemoryFormat::Preserve));
  }
}

void Muon::step(double lr) {
  AdamW::step(lr * muon_options_.adamw_lr_ratio);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < matrices_.size(); ++i) update(matrices_[i], buffers_[i], lr);
  if (qk_clip_) qk_clip_stats_ = qk_clip_->apply();
}

std::map<std::string, double> Muon::step_metrics() const {
  if (!qk_clip_) return {};
  return {{"qk_clip/heads", static_cast<double>(qk_clip_stats_.heads_clipped)},
          {"qk_clip/max_logit", qk_clip_stats_.max_logit}};
}

// The piece's elements (1-D) of the orthogonalised whole matrix, or of each orthogonalised
// expert matrix of its box, assembled from every rank's u.
torch::Tensor Muon::orthogonal_piece(const MuonMatrix& matrix, const torch::Tensor& u) const {
  const auto& o = muon_options_;
  const auto& name = matrix.parameter.name;
  const int64_t count = u.numel(), box_numel = numel_of(matrix.sizes);
  // Never a piece taken for the whole matrix: that is the silent trap MuonOrthogonalize::piece.
  TORCH_CHECK(matrix.sum_pieces || count == box_numel, "Muon: ", name, " is a piece of ", count, " of ", box_numel,
              " elements, and there is no sum over the pieces to assemble it");
  auto box = u.reshape(-1);
  if (matrix.sum_pieces) {  // on every rank of the group, even one whose piece is the box or empty
    box = torch::zeros({box_numel}, u.options());
    box.narrow(0, matrix.begin, count).copy_(u.reshape(-1));
    matrix.sum_pieces(box);
  }
  box = box.reshape(matrix.sizes);
  torch::Tensor orthogonal;  // the box's elements
  if (matrix.shape.size() == 3) {
    std::vector<torch::Tensor> experts;
    for (int64_t e = 0; e < box.size(0); ++e) experts.push_back(newton_schulz(box[e], o.ns_steps, o.ns_dtype));
    orthogonal = torch::stack(experts);
  } else if (!matrix.sum_boxes) {
    TORCH_CHECK(matrix.sizes == matrix.shape, "Muon: ", name, " is a slice of its matrix, and there is no sum over "
                "the slices to assemble it");
    orthogonal = newton_schulz(box, o.ns_steps, o.ns_dtype);
  } else {
    auto whole = torch::zeros(matrix.shape, u.options());
    box_of(whole, matrix).copy_(box);
    matrix.sum_boxes(whole);
    orthogonal = box_of(newton_schulz(whole, o.ns_steps, o.ns_dtype), matrix);
  }
  orthogonal = orthogonal.reshape(-1);
  return count == box_numel ? orthogonal : orthogonal.narrow(0, matrix.begin, count);
}

void Muon::update(MuonMatrix& matrix, torch::Tensor& buffer, double lr) {
  auto& p = matrix.parameter.tensor;
  auto grad = p.grad();
  if (!grad.defined()) {
    if (!matrix.sum_pieces && !matrix.sum_boxes) return;  // as torch: no gradient, no update
    grad = torch::zeros_like(p);  // every rank joins the sums
  }
  const auto& o = muon_options_;
  buffer.lerp_(grad, 1.0 - o.momentum);
  const auto u = o.nesterov ? grad.lerp(buffer, o.momentum) : buffer;
  const auto& shape = matrix.shape;
  const int64_t rows = shape[shape.size() - 2], cols = shape.back();
  const int64_t count = p.numel();
  torch::Tensor orthogonal;  // this piece's elements of the update, in ns_dtype, p's shape
  if (o.orthogonalize == MuonOrthogonalize::piece) {
    // The trap: the piece's flattening taken as a matrix of whole rows where it can be.
    if (count == 0) return;
    const auto flat = u.reshape(-1);
    const auto as_matrix = count % cols == 0 ? flat.view({count / cols, cols}) : flat.view({1, count});
    orthogonal = newton_schulz(as_matrix, o.ns_steps, o.ns_dtype).reshape(p.sizes());
  } else {
    orthogonal = orthogonal_piece(matrix, u).view(p.sizes());
  }
  if (matrix.parameter.decay && o.weight_decay != 0.0) p.mul_(1.0 - lr * o.weight_decay);
  p.add_(orthogonal, -muon_adjusted_lr(lr, o.adjust_lr, rows, cols));
}

std::map<std::string, torch::Tensor> Muon::state() const {
  auto state = AdamW::state();
  for (size_t i = 0; i < matrices_.size(); ++i) {
    const auto& name = matrices_[i].parameter.name;
    state["exp_avg." + name] = buffers_[i];
    state["exp_avg_sq." + name] = torch::zeros_like(buffers_[i]);
  }
  return state;
}

void Muon::load_state(const std::map<std::string, torch::Tensor>& state) {
  AdamW::load_state(state);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < matrices_.size(); ++i) {
    const auto key = "exp_avg." + matrices_[i].parameter.name;
    const auto found = state.find(key);
    if (found == state.end()) throw InputError(fmt::format("optimizer state has no entry '{}'", key));
    if (found->second.numel() != buffers_[i].numel())
      throw InputError(fmt::format("optimizer state '{}' has {} elements, the model needs {}", key,
                                   found->second.numel(), buffers_[i].numel()));
    buffers_[i].copy_(found->second.view(buffers_[i].sizes()));
  }
}

}  // namespace xtrain::optim
