#include "parallel/parallel_model.h"

#include <torch/torch.h>

#include "memory/activation_offload.h"
#include "optim/grad_clip.h"
#include "parallel/comm.h"
#include "parallel/device_mesh.h"
#include "parallel/expert_dispatch.h"

namespace xtrain::parallel {

CommSeconds CommSeconds::operator-(const CommSeconds& earlier) const {
  return {blocked - earlier.blocked,
          tensor_parallel - earlier.tensor_parallel,
          expert_forward - earlier.expert_forward,
          expert_backward - earlier.expert_backward,
          ring_attention - earlier.ring_attention,
          ring_blocked - earlier.ring_blocked,
          waits - earlier.waits,
          tensor_parallel_waits - earlier.tensor_parallel_waits,
          expert_waits - earlier.expert_waits,
          ring_waits - earlier.ring_waits};
}

ParallelModel::ParallelModel(std::shared_ptr<model::CausalLM> model, const DeviceMesh* mesh) : model_(std::move(model)) {
  if (!mesh) return;
  groups_ = mesh->distinct_groups();
  tensor_parallel_ = mesh->group(Dim::tp);
}

ParallelModel::~ParallelModel() = default;

void ParallelModel::begin_micro_batch(bool last) {
  begin_units(last);
  if (offloader_) offloader_->begin_forward();
}

CommSeconds ParallelModel::comm_seconds() const {
  CommSeconds seconds;
  for (const auto& group : groups_) {
    seconds.blocked += group->blocked_seconds();
    seconds.waits += group->blocked_waits();
  }
  if (tensor_parallel_) {
    seconds.tensor_parallel = tensor_parallel_->blocked_seconds();
    seconds.tensor_parallel_waits = tensor_parallel_->blocked_waits();
  }
  for (const auto& dispatcher : expert_dispatchers_) {
    seconds.expert_forward += dispatcher->forward_blocked_seconds();
    seconds.expert_backward += dispatcher->backward_blocked_seconds();
    seconds.expert_waits += dispatcher->blocked_waits();
  }
  if (ring_times_) {
    seconds.ring_attention = ring_times_->attention_seconds();
    seconds.ring_blocked = ring_times_->blocked_seconds();
    seconds.ring_waits = ring_times_->waits.load();
  }
  return seconds;
}

WholeModel::WholeModel(std::shared_ptr<model::CausalLM> model) : ParallelModel(std::move(model)) {
  for (const auto& item : model_->named_parameters()) {
    const auto shape = item.value().sizes().vec();
    ParameterShard piece;
    piece.name = item.key();
    piece.shape = shape;
    piece.offsets.assign(shape.size(), 0);
    piece.sizes = shape;
    piece.local = item.value();
    pieces_.push_back(std::move(piece));
  }
}

std::vector<ParameterShard*> WholeModel::parameters() {
  std::vector<ParameterShard*> pieces;
  for (auto& piece : pieces_) pieces.push_back(&piece);
  return pieces;
}

void WholeModel::zero_grad() {
  for (auto& piece : pieces_)
    if (piece.local.requires_grad()) piece.local.mutable_grad() = torch::Tensor();
}

double WholeModel::clip_grad_norm(double max_norm) {
  std::vector<torch::Tensor> trainable;
  for (const auto& piece : pieces_)
    if (piece.local.requires_grad()) trainable.push_back(piece.local);
  return optim::clip_grad_norm(trainable, max_norm);
}

int64_t WholeModel::resident_bytes() const {
  int64_t bytes = 0;
  for (const auto& piece : pieces_)
    if (piece.local.requires_grad()) bytes += 2 * piece.local.numel() * static_cast<int64_t>(sizeof(float));
  return bytes;
}

}  // namespace xtrain::parallel
