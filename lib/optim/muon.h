// Muon (Keller Jordan 2024; Moonlight, Liu et al. 2025): momentum orthogonalised by the quintic
// Newton-Schulz iteration, for the model's hidden weight matrices; everything else (embeddings,
// the output head, norms, biases, routers: muon_takes() says which) takes AdamW, whose state and
// update this class inherits. The matrix update is torch.optim.Muon's, op for op (bfloat16
// Newton-Schulz with at::mm / at::addmm, coefficients 3.4445, -4.7750, 2.0315, transposed when
// rows > cols, normalised by the Frobenius norm clamped at 1e-7; float32 on request, since in
// bfloat16 a gradient differing in its last bit, as another layout's reduction order gives, can
// round differently and move an update by a bfloat16 step):
//   buf.lerp_(g, 1 - momentum); u = nesterov ? g.lerp(buf, momentum) : buf;
//   p *= 1 - lr * wd; p -= adjusted_lr * NS(u),
// adjusted_lr = lr * sqrt(max(1, A/B)) (original) or lr * 0.2 * sqrt(max(A, B)) (match_rms_adamw).
// A 3-D expert tensor [experts, A, B] is a stack of matrices: each expert's matrix is
// orthogonalised alone and scaled by its own [A, B] (torch.optim.Muon refuses 3-D; this is what it
// does applied to each slice).
//
// Sharded parameters: a rank holds a box of the whole tensor (a tensor-parallel slice, or a
// range of experts; the whole tensor without either) and of that box the elements
// [begin, begin + numel) of its flattening (FSDP's piece). The element-wise momentum stays on the
// piece. A matrix's u is assembled whole, first its box from the pieces over the ranks that
// share the box (`sum_pieces`, FSDP's shard group), then the whole from the boxes over the ranks
// that hold the others (`sum_boxes`, the tensor-parallel group); every rank orthogonalises the
// whole matrix (the same bits everywhere) and keeps its own elements of the result. An expert
// stack's box holds whole experts, which are orthogonalised each alone: only the box is
// assembled, and each rank updates its own experts. Orthogonalising the piece alone is a
// different (wrong) update: MuonOrthogonalize::piece exists only to show that the parity tests
// catch it.
//
// Checkpoints keep AdamW's layout: a matrix's momentum buffer is its "exp_avg" (the same
// recurrence as Adam's first moment), and its "exp_avg_sq" is zeros.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "optim/adamw.h"
#include "optim/qk_clip.h"

namespace xtrain::optim {

enum class MuonAdjustLr { original, match_rms_adamw };
enum class MuonOrthogonalize { whole, piece };

struct MuonOptions {
  double momentum = 0.95;
  bool nesterov = true;
  int64_t ns_steps = 5;
  MuonAdjustLr adjust_lr = MuonAdjustLr::original;
  // torch's bfloat16, or float32: the same ops, for runs that must agree across layouts.
  torch::ScalarType ns_dtype = torch::kBFloat16;
  double weight_decay = 0.1;
  // The AdamW part's lr as a multiple of the lr step() is given (optim.muon.adamw_lr / optim.lr).
  double adamw_lr_ratio = 1.0;
  MuonOrthogonalize orthogonalize = MuonOrthogonalize::whole;
};

// Sums a tensor in place over a group of ranks; called in the same order on every rank of it.
using MuonSum = std::function<void(torch::Tensor&)>;

// One matrix (or stack of expert matrices) that Muon updates: this rank's piece of it.
struct MuonMatrix {
  NamedParameter parameter;      // .tensor: the piece (any shape; numel elements from `begin`)
  std::vector<int64_t> shape;    // of the whole tensor: [A, B] or [experts, A, B]
  int64_t begin = 0;             // in the box's flattening
  std::vector<int64_t> offsets;  // of the box in the whole tensor; empty: the box is the whole
  std::vector<int64_t> sizes;    // of the box
  MuonSum sum_pieces;            // over the ranks holding the box's other pieces; none: one piece
  MuonSum sum_boxes;             // over the ranks holding the other boxes of a matrix; none: one box
};

// Whether Muon takes the parameter `name` of `dims` dimensions: 2-D weights other than
// embeddings, the output head and routers, and the 3-D expert stacks.
bool muon_takes(const std::string& name, size_t dims);

// The orthogonalisation of one 2-D matrix, torch's _zeropower_via_newtonschulz, computed (and
// returned) in `dtype`.
torch::Tensor newton_schulz(const torch::Tensor& matrix, int64_t steps, torch::ScalarType dtype = torch::kBFloat16);
// lr scaled for a [rows, cols] matrix by the rule.
double muon_adjusted_lr(double lr, MuonAdjustLr rule, int64_t rows, int64_t cols);

class Muon final : public AdamW {
 public:
  // `adamw_part` takes AdamWOptions; `matrices` Muon. A matrix's piece short of its box without
  // sum_pieces, or a 2-D box short of the whole without sum_boxes, is an error at the first step.
  Muon(std::vector<NamedParameter> adamw_part, std::vector<MuonMatrix> matrices, AdamWOptions adamw_options,
       MuonOptions options);

  void step(double lr) override;
  std::map<std::string, torch::Tensor> state() const override;
  void load_state(const std::map<std::string, torch::Tensor>& state) override;

  int64_t matrix_count() const { return static_cast<int64_t>(matrices_.size()); }
  // optim.muon.qk_clip_tau: `clip` runs after each step's updates (optim/qk_clip.h), and
  // step_metrics() reports qk_clip/heads (heads clipped) and qk_clip/max_logit.
  void use_qk_clip(std::unique_ptr<QkClip> clip) { qk_clip_ = std::move(clip); }
  std::map<std::string, double> step_metrics() const override;

 private:
  void update(MuonMatrix& matrix, torch::Tensor& buffer, double lr);
  torch::Tensor orthogonal_piece(const MuonMatrix& matrix, const torch::Tensor& u) const;

  std::vector<MuonMatrix> matrices_;
  std::vector<torch::Tensor> buffers_;
  MuonOptions muon_options_;
  std::unique_ptr<QkClip> qk_clip_;
  QkClipStats qk_clip_stats_;
};

}  // namespace xtrain::optim
