#include "parallel/fully_sharded.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "parallel/sharded_unit_node.h"
#include "util/input_error.h"
#include "util/numeric_fault.h"

namespace xtrain::parallel {

// One block's units (its dense part, and under expert parallelism its experts), which move
// together: each step below starts every unit's collective before waiting on any.
class BlockUnits {
 public:
  std::vector<std::unique_ptr<ShardUnit>> units;

  void start_gather() { each(&ShardUnit::start_gather); }
  void wait_gather() { each(&ShardUnit::wait_gather); }
  void reshard() { each(&ShardUnit::reshard); }
  void prepare_gradients() { each(&ShardUnit::prepare_gradients); }
  void start_reduce(bool last_micro_batch) {
    for (auto& unit : units) unit->start_reduce(last_micro_batch);
  }
  void finish_reduce() { each(&ShardUnit::finish_reduce); }

 private:
  void each(void (ShardUnit::*step)()) {
    for (auto& unit : units) ((*unit).*step)();
  }
};

FullyShardedModel::FullyShardedModel(std::shared_ptr<model::CausalLM> model, DeviceMesh mesh, bool reshard_after_forward,
                                     const model::ParameterSource& source, std::optional<model::ShardPlan> given_plan)
    : ParallelModel(std::move(model), &mesh),
      mesh_(std::move(mesh)),
      reshard_after_forward_(reshard_after_forward) {
  auto plan = given_plan ? std::move(*given_plan) : model_->shard_plan();
  // No embedding unit: the root unit holds the table (tied embeddings), or parameters used
  // between blocks (a vision-language model's tower embeddings and projector); it stays gathered.
  tied_ = !plan.embedding;
  auto unit = [this, &source, &plan](model::ShardPlan::Unit& u) {
    return std::make_unique<ShardUnit>(u.name, std::move(u.parameters), mesh_.shard_group(u.shard_over),
                                       mesh_.group(u.replicate_over), source, u.placements, plan.float8_gathered);
  };
  if (plan.embedding) embed_ = unit(*plan.embedding);
  for (auto& block : plan.blocks) {
    blocks_.push_back(std::make_unique<BlockUnits>());
    for (auto& u : block) blocks_.back()->units.push_back(unit(u));
  }
  head_ = unit(plan.head);
  check_numeric_fault_unit();
  // Wraps whatever runner the memory policy installed (recompute, offload): it runs inside.
  auto inner = model_->block_runner;
  model_->block_runner = [this, inner](int64_t layer, const torch::Tensor& x, const UnitFn& block) {
    const UnitHooks hooks{[this, layer] { before_block_forward(layer); }, [this, layer] { after_block_forward(layer); },
                          [this, layer] { before_block_backward(layer); },
                          [this, layer] { after_block_backward(layer); }};
    if (!inner) return run_sharded_unit(hooks, x, block);
    UnitFn wrapped = [&inner, layer, &block](const torch::Tensor& input) { return inner(layer, input, block); };
    return run_sharded_unit(hooks, x, wrapped);
  };
  if (!tied_) {
    // The lookup's backward needs the ids, not the table: the table is gathered for forward
    // only, and backward needs just the full gradient buffer.
    model_->embed_runner = [this](const torch::Tensor& ids, const UnitFn& embed) {
      ShardUnit* unit = embed_.get();
      const UnitHooks hooks{[this, unit] {
                              unit->wait_gather();
                              note_peak();
                            },
                            [unit] { unit->reshard(); },
                            [this, unit] {
                              unit->prepare_gradients_ungathered();
                              note_peak();
                            },
                            [this, unit] {
                              if (!blocks_.empty()) blocks_.front()->finish_reduce();
                              unit->start_reduce(last_micro_batch_);
                              unit->reshard();
                            }};
      return run_sharded_unit(hooks, ids, embed);
    };
  }
  note_peak();
}

FullyShardedModel::~FullyShardedModel() {
  model_->block_runner = nullptr;
  model_->embed_runner = nullptr;
}

void FullyShardedModel::check_numeric_fault_unit() const {
  const auto& fault = util::numeric_fault();
  if (!fault.is(util::NumericFaultKind::skip_reduce_scatter)) return;
  std::vector<std::string> names;
  for (const auto* unit : units()) {
    if (unit->name() == fault.target) return;
    names.push_back(unit->name());
  }
  throw InputError(fmt::format("XTRAIN_NUMERIC_FAULT=skip_reduce_scatter:{}: no FSDP unit has that name (units: {})",
                               fault.target, fmt::join(names, ", ")));
}

std::vector<ShardUnit*> FullyShardedModel::units() const {
  std::vector<ShardUnit*> all;
  if (embed_) all.push_back(embed_.get());
  for (const auto& block : blocks_)
    for (const auto& unit : block->units) all.push_back(unit.get());
  all.push_back(head_.get());
  return all;
}

std::vector<ParameterShard*> FullyShardedModel::parameters() {
  std::vector<ParameterShard*> all;
  for (auto* unit : units())
    for (auto& p : unit->parameters()) all.push_back(&p);
  // Model order, as the single-process optimizer sees them (a tied table comes first, not with the head).
  std::map<std::string, size_t> position;
  for (const auto& item : model_->named_parameters()) position.emplace(item.key(), position.size());
  std::stable_sort(all.begin(), all.end(), [&position](const ParameterShard* a, const ParameterShard* b) {
    return position.at(a->name) < position.at(b->name);
  });
  return all;
}

void FullyShardedModel::begin_units(bool last) {
  last_micro_batch_ = last;
  if (head_gathered_for_whole_pass()) {
    head_->wait_gather();
    head_->prepare_gradients();
  }
  if (embed_) embed_->start_gather();
  if (!blocks_.empty()) blocks_.front()->start_gather();
  note_peak();
}

// A tied table is read by the first unit's lookup and the head; the final norm of a model with
// multi-token prediction is read before the prediction depths, whose losses use the head too.
bool FullyShardedModel::head_gathered_for_whole_pass() const {
  return tied_ || blocks_.empty() || model_->config().mtp_layers > 0;
}

void FullyShardedModel::before_block_forward(int64_t layer) {
  blocks_[layer]->wait_gather();
  if (layer + 1 < static_cast<int64_t>(blocks_.size()))
    blocks_[layer + 1]->start_gather();
  else
    head_->start_gather();  // the final norm and the head come next
  note_peak();
}

void FullyShardedModel::after_block_forward(int64_t layer) {
  const bool training = torch::GradMode::is_enabled();
  // The last block's backward comes first: keep it gathered rather than free and fetch it again.
  const bool last_block = layer + 1 == static_cast<int64_t>(blocks_.size());
  if (!training || (reshard_after_forward_ && !last_block)) blocks_[layer]->reshard();
  if (last_block && !head_gathered_for_whole_pass()) {
    head_->wait_gather();
    if (training) head_->prepare_gradients();
    note_peak();
  }
}

void FullyShardedModel::before_block_backward(int64_t layer) {
  if (layer + 1 == static_cast<int64_t>(blocks_.size()) && !head_gathered_for_whole_pass()) {
    // The loss, the head and the final norm are behind: their gradients are complete (autograd
    // runs a parameter's gradient accumulation as soon as it is ready, before the nodes that
    // the same backward step feeds).
    head_->start_reduce(last_micro_batch_);
    head_->reshard();
  }
  blocks_[layer]->wait_gather();
  if (layer > 0) blocks_[layer - 1]->start_gather();
  blocks_[layer]->prepare_gradients();
  note_peak();
}

void FullyShardedModel::after_block_backward(int64_t layer) {
  note_peak();
  // The unit behind has reduced while this block computed; its full gradient buffer goes now,
  // so that no more than two are ever held.
  if (layer + 1 < static_cast<int64_t>(blocks_.size()))
    blocks_[layer + 1]->finish_reduce();
  else if (!head_gathered_for_whole_pass())
    head_->finish_reduce();
  blocks_[layer]->start_reduce(last_micro_batch_);
  blocks_[layer]->reshard();
}

void FullyShardedModel::end_units() {
  if (head_gathered_for_whole_pass()) {
    head_->start_reduce(last_micro_batch_);
    // Backward is done with the table's values: they go while its gradient reduces, unless the
    // next micro batch needs them again.
    if (last_micro_batch_) head_->reshard();
  }
  note_peak();
  for (auto* unit : units()) unit->finish_reduce();
  if (!last_micro_batch_) return;
  head_->reshard();
}

void FullyShardedModel::zero_grad() {
  for (auto* unit : units()) unit->zero_shard_grad();
}

double FullyShardedModel::clip_grad_norm(double max_norm) {
  return clip_units_grad_norm(units(), *mesh_.group(Dim::world), max_norm);
}

void FullyShardedModel::set_replica_reduction(bool on) {
  for (auto* unit : units()) unit->set_replica_reduction(on);
}

double clip_units_grad_norm(const std::vector<ShardUnit*>& units, Comm& world, double max_norm,
                            const std::vector<ShardUnit*>& duplicates) {
  torch::NoGradGuard no_grad;
  // Shards are disjoint within their sharding group and equal across its replicas and across
  // the tensor-parallel ranks that hold the same piece; pipeline stages hold different units.
  // Summed over every rank, each piece's squares count once per replica and copy, whatever
  // groups it shards and replicates over (dense units, experts and tensor-parallel slices
  // alike). On the parameters' device: one host read, of the reduced norm, per step.
  auto squares = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64));
  for (auto* unit : units) {
    if (squares.device() != unit->shard_grad().device()) squares = squares.to(unit->shard_grad().device());
    for (auto& piece : unit->parameters())
      squares.add_(piece.local.grad().to(torch::kFloat64).square().sum() /
                   static_cast<double>(unit->replicas() * piece.copies));
  }
  world.all_reduce_sum(squares).wait();
  const double norm = std::sqrt(squares.item<double>());
  if (max_norm > 0) {
    const double coefficient = max_norm / (norm + 1e-6);
    if (coefficient < 1.0) {
      for (auto* unit : units) unit->shard_grad().mul_(coefficient);
      for (auto* unit : duplicates) unit->shard_grad().mul_(coefficient);
    }
  }
  return norm;
}

// The embedding gathers itself for each lookup and the blocks for each forward; the head is
// gathered after the last block (or from the start) until end_inference().
void FullyShardedModel::begin_inference() {
  if (head_gathered_for_whole_pass()) head_->wait_gather();
}
void FullyShardedModel::end_inference() { head_->reshard(); }

int64_t FullyShardedModel::resident_bytes() const {
  int64_t bytes = 0;
  for (const auto* unit : units()) bytes += unit->resident_bytes();
  return bytes;
}

int64_t FullyShardedModel::gathered_bytes() const {
  int64_t bytes = 0;
  for (const auto* unit : units()) bytes += unit->gathered_bytes();
  return bytes;
}

void FullyShardedModel::note_peak() { peak_bytes_ = std::max(peak_bytes_, resident_bytes()); }

}  // namespace xtrain::parallel
