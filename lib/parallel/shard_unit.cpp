#include "parallel/shard_unit.h"

#include <algorithm>

#include <torch/torch.h>

#include "ckpt/piece_layout.h"
#include "util/numeric_fault.h"

namespace xtrain::parallel {
namespace {

// The shard's elements from the source, one run of consecutive whole-tensor elements at a time
// (a row-parallel part is a run per row).
void read_piece(const model::ParameterSource& source, ParameterShard& shard) {
  const ckpt::PieceLayout layout{shard.shape, shard.offsets, shard.sizes, shard.begin, shard.local.numel()};
  for (const auto& run : ckpt::piece_runs(layout))
    shard.local.narrow(0, run.local, run.length).copy_(source(shard.name, run.global, run.length));
}

// A gathered buffer's memory goes on reshard, but its storage stays: tensors that autograd saved
// from views of the parameters (a MoE block's experts, taken apart by unbind) hold that storage,
// and would otherwise keep every block's whole buffer from its forward to its backward. The next
// gather fills the same storage, where those views find the values again.
void release_memory(const torch::Tensor& flat) {
  auto* storage = flat.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(c10::DataPtr(nullptr, flat.device()));
  storage->set_nbytes(0);
}

void restore_memory(const torch::Tensor& flat) {
  auto* storage = flat.storage().unsafeGetStorageImpl();
  const size_t bytes = static_cast<size_t>(flat.numel()) * flat.element_size();
  storage->set_data_ptr_noswap(storage->allocator()->allocate(bytes));
  storage->set_nbytes(bytes);
}

}  // namespace

ShardUnit::ShardUnit(std::string name, std::vector<std::pair<std::string, torch::Tensor>> params,
                     std::shared_ptr<Comm> shard_group, std::shared_ptr<Comm> replica_group,
                     const model::ParameterSource& source, const std::map<std::string, model::Placement>& placements,
                     const std::map<std::string, model::ScaleBlock>& float8_gathered)
    : name_(std::move(name)), shard_group_(std::move(shard_group)), replica_group_(std::move(replica_group)) {
  torch::NoGradGuard no_grad;
  for (auto& [param_name, param] : params) {
    TORCH_CHECK(param.scalar_type() == torch::kFloat32, "FSDP keeps fp32 master parameters; ", param_name, " is ",
                param.scalar_type());
    TORCH_CHECK(param.device() == params.front().second.device(), "unit ", name_, ": ", param_name, " is on ",
                param.device(), ", the unit's first parameter on ", params.front().second.device());
    members_.push_back({param_name, param, param.sizes().vec(), numel_, param.numel()});
    numel_ += param.numel();
  }
  // Buffers live where the parameters do.
  options_ = torch::TensorOptions().dtype(torch::kFloat32).device(params.empty() ? torch::Device(torch::kCPU)
                                                                                 : params.front().second.device());
  const int64_t ranks = shard_group_->size(), rank = shard_group_->rank();
  padded_ = (numel_ + ranks - 1) / ranks * ranks;
  const int64_t shard_numel = padded_ / ranks, shard_begin = rank * shard_numel;
  shard_ = torch::zeros({shard_numel}, options_);
  shard_grad_ = torch::zeros({shard_numel}, options_);
  for (const auto& m : members_) {
    // The part of [offset, offset + numel) inside [shard_begin, shard_begin + shard_numel).
    const int64_t first = std::clamp(shard_begin - m.offset, int64_t{0}, m.numel);
    const int64_t last = std::clamp(shard_begin + shard_numel - m.offset, int64_t{0}, m.numel);
    const int64_t at = std::clamp(m.offset + first - shard_begin, int64_t{0}, shard_numel);
    const auto placed = placements.find(m.name);
    const bool part = placed != placements.end();
    ParameterShard piece{m.name,
                         part ? placed->second.whole_shape : m.shape,
                         part ? placed->second.offsets : std::vector<int64_t>(m.shape.size(), 0),
                         m.shape,
                         first,
                         part ? placed->second.copies : 1,
                         shard_.narrow(0, at, last - first)};
    if (source)
      read_piece(source, piece);
    else
      piece.local.copy_(m.param.reshape(-1).narrow(0, first, last - first));
    piece.local.mutable_grad() = shard_grad_.narrow(0, at, last - first);
    piece.replica = replica_group_->rank() != 0;
    shards_.push_back(std::move(piece));
  }
  if (sharded()) {
    std::vector<Float8Gather::Weight> float8_weights;
    for (const auto& m : members_)
      if (const auto found = float8_gathered.find(m.name); found != float8_gathered.end())
        float8_weights.push_back({m.param, m.shape, m.offset, m.numel, found->second});
    if (!float8_weights.empty())
      float8_ = std::make_unique<Float8Gather>(std::move(float8_weights), padded_, shard_group_);
    for (auto& m : members_) m.param.set_data(torch::empty({0}, torch::kFloat32));
  } else {
    // One rank holds everything: the shard is the full buffer, for good; gradients accumulate
    // straight into the shard's gradient.
    full_ = shard_;
    point_parameters_at(shard_);
    for (auto& m : members_) m.param.mutable_grad() = shard_grad_.narrow(0, m.offset, m.numel).view(m.shape);
    gathered_ = true;
  }
}

ShardUnit::~ShardUnit() {
  if (float8_) float8_->release();
}

void ShardUnit::point_parameters_at(const torch::Tensor& flat) {
  for (auto& m : members_) m.param.set_data(flat.narrow(0, m.offset, m.numel).view(m.shape));
}

void ShardUnit::start_gather() {
  if (gathered_ || gathering_) return;
  if (full_.defined())
    restore_memory(full_);
  else
    full_ = torch::empty({padded_}, options_);
  if (float8_) {
    gather_ = float8_->start(shard_);
    gathered_bytes_ += float8_->received_bytes();
  } else {
    gather_ = shard_group_->all_gather(full_, shard_);
    gathered_bytes_ += (shard_group_->size() - 1) * shard_.numel() * static_cast<int64_t>(sizeof(float));
  }
  gathering_ = true;
}

void ShardUnit::wait_gather() {
  if (gathered_) return;
  start_gather();
  gather_.wait();
  if (float8_) float8_->finish(full_);
  point_parameters_at(full_);
  gathering_ = false;
  gathered_ = true;
}

void ShardUnit::reshard() {
  if (!sharded()) return;
  if (gathering_) wait_gather();
  for (auto& m : members_) m.param.set_data(torch::empty({0}, torch::kFloat32));
  if (float8_) float8_->release();
  if (full_.defined()) release_memory(full_);
  gathered_ = false;
}

void ShardUnit::prepare_gradients() {
  if (!sharded()) return;  // the parameters' gradients are views of shard_grad_ for good
  TORCH_CHECK(!reducing_, "unit ", name_, ": gradients prepared while a reduction is in flight");
  full_grad_ = torch::zeros({padded_}, options_);
  for (auto& m : members_) m.param.mutable_grad() = full_grad_.narrow(0, m.offset, m.numel).view(m.shape);
}

void ShardUnit::prepare_gradients_ungathered() {
  if (sharded() && !gathered_ && !gathering_) {
    const auto stand_in = torch::zeros({1}, options_);
    for (auto& m : members_) m.param.set_data(stand_in.expand(m.shape));
  }
  prepare_gradients();
}

void ShardUnit::inject_gradient_fault(const torch::Tensor& flat_grad) const {
  const auto& fault = util::numeric_fault();
  if (!fault.strikes_here(util::NumericFaultKind::grad_scale)) return;
  for (const auto& m : members_)
    if (m.name == fault.target) flat_grad.narrow(0, m.offset, m.numel).mul_(1.0 + util::kNumericFaultGradScale);
}

void ShardUnit::start_reduce(bool last_micro_batch) {
  if (!sharded()) {
    if (!last_micro_batch) return;
    inject_gradient_fault(shard_grad_);
    if (replica_group_->size() == 1) return;
    if (!replica_reduction_) {
      shard_grad_.mul_(static_cast<double>(replicas()));
      return;
    }
    reduce_ = replica_group_->all_reduce_sum(shard_grad_);
    reducing_ = true;
    return;
  }
  TORCH_CHECK(full_grad_.defined(), "unit ", name_, ": reduce without prepared gradients");
  for (auto& m : members_) m.param.mutable_grad() = torch::Tensor();
  inject_gradient_fault(full_grad_);
  reduce_out_ = torch::empty({shard_.numel()}, options_);
  const auto& fault = util::numeric_fault();
  if (fault.is(util::NumericFaultKind::skip_reduce_scatter) && fault.target == name_) {
    reduce_out_.copy_(full_grad_.narrow(0, shard_group_->rank() * shard_.numel(), shard_.numel()));
    reduce_ = PendingCollective();
  } else {
    reduce_ = shard_group_->reduce_scatter_sum(reduce_out_, full_grad_);
  }
  reducing_ = true;
}

void ShardUnit::finish_reduce() {
  if (!reducing_) return;
  reduce_.wait();
  reducing_ = false;
  if (!sharded()) return;
  if (replica_group_->size() > 1 && replica_reduction_) replica_group_->all_reduce_sum(reduce_out_).wait();
  if (replica_group_->size() > 1 && !replica_reduction_) reduce_out_.mul_(static_cast<double>(replicas()));
  shard_grad_.add_(reduce_out_);
  reduce_out_ = torch::Tensor();
  full_grad_ = torch::Tensor();
}

void ShardUnit::zero_shard_grad() { shard_grad_.zero_(); }

int64_t ShardUnit::resident_bytes() const {
  int64_t elements = shard_.numel() + shard_grad_.numel();
  if (sharded() && (gathered_ || gathering_)) elements += full_.numel();
  if (full_grad_.defined()) elements += full_grad_.numel();
  if (reduce_out_.defined()) elements += reduce_out_.numel();
  return elements * static_cast<int64_t>(sizeof(float));
}

}  // namespace xtrain::parallel
