#include "train/pipeline_schedule.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <stdexcept>

#include <torch/torch.h>

#include "util/thread_cpu_clock.h"

namespace xtrain::train {
namespace {

constexpr int64_t kActivationTag = 1, kGradientTag = 2;
constexpr int64_t kHeaderLength = 8;  // dims, up to 6 sizes, dtype

}  // namespace


PipelineSchedule::PipelineSchedule(config::PpSchedule schedule, parallel::PipelineStage& stage,
                                   std::shared_ptr<parallel::Comm> pp_group, int64_t virtual_stages,
                                   torch::Device device)
    : schedule_(schedule),
      stage_(stage),
      group_(std::move(pp_group)),
      device_(device) {
  TORCH_CHECK(virtual_stages == stage.placement().virtual_stages, "a pipeline schedule of ", virtual_stages,
              " chunks a rank over a stage of ", stage.placement().virtual_stages);
}

template <typename Forward>
ChunkOutput PipelineSchedule::run_chunk(int64_t chunk, const torch::Tensor& input, Forward&& forward) {
  const auto& part = stage_.chunks()[static_cast<size_t>(chunk)];
  MicroBatchLosses losses;
  auto output = stage_.run_chunk(chunk, input, [&](const torch::Tensor& x) {
    auto out = forward(part, x);
    losses = std::move(out.losses);
    return out.output;
  });
  return {output, losses};
}

void PipelineSchedule::send(const torch::Tensor& tensor, int64_t peer, int64_t tag) {
  const auto values = tensor.detach().contiguous();
  auto header = torch::zeros({kHeaderLength}, torch::kInt64);
  TORCH_CHECK(values.dim() <= kHeaderLength - 2, "a pipeline activation of ", values.dim(), " dimensions");
  header[0] = values.dim();
  for (int64_t d = 0; d < values.dim(); ++d) header[d + 1] = values.size(d);
  header[kHeaderLength - 1] = static_cast<int64_t>(values.scalar_type());
  const auto header_here = header.to(values.device());
  sends_.push_back(group_->send_recv({{parallel::PeerTransfer::Kind::send, header_here, peer, tag},
                                      {parallel::PeerTransfer::Kind::send, values, peer, tag}}));
  in_flight_.push_back(header_here);
  in_flight_.push_back(values);
}

torch::Tensor PipelineSchedule::receive(int64_t peer, int64_t tag, const torch::TensorOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  auto header = torch::empty({kHeaderLength}, options.dtype(torch::kInt64));
  group_->send_recv({{parallel::PeerTransfer::Kind::recv, header, peer, tag}}).wait();
  const auto sizes_host = header.to(torch::kCPU);
  const auto* h = sizes_host.data_ptr<int64_t>();
  const std::vector<int64_t> shape(h + 1, h + 1 + h[0]);
  auto values = torch::empty(shape, options.dtype(static_cast<c10::ScalarType>(h[kHeaderLength - 1])));
  group_->send_recv({{parallel::PeerTransfer::Kind::recv, values, peer, tag}}).wait();
  idle_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return values;
}

torch::Tensor PipelineSchedule::take_input(int64_t global, int64_t m, const torch::TensorOptions& options) {
  const int64_t from = stage_.placement().rank_of(global - 1);
  if (from != group_->rank()) return receive(from, kActivationTag, options);
  auto handed = handed_inputs_.extract({global, m});
  TORCH_CHECK(!handed.empty(), "pipeline: chunk ", global, " micro batch ", m, " runs before chunk ", global - 1);
  return handed.mapped();
}

void PipelineSchedule::give_output(int64_t global, int64_t m, const torch::Tensor& output) {
  const int64_t to = stage_.placement().rank_of(global + 1);
  if (to != group_->rank()) return send(output, to, kActivationTag);
  handed_inputs_[{global + 1, m}] = output.detach();
}

torch::Tensor PipelineSchedule::take_gradient(int64_t global, int64_t m, const torch::TensorOptions& options) {
  const int64_t from = stage_.placement().rank_of(global + 1);
  if (from != group_->rank()) return receive(from, kGradientTag, options);
  auto handed = handed_gradients_.extract({global, m});
  TORCH_CHECK(!handed.empty(), "pipeline: backward of chunk ", global, " micro batch ", m, " before chunk ",
              global + 1, "'s");
  return handed.mapped();
}

void PipelineSchedule::give_input_gradient(int64_t global, int64_t m, const torch::Tensor& gradient) {
  const int64_t to = stage_.placement().rank_of(global - 1);
  if (to != group_->rank()) return send(gradient, to, kGradientTag);
  handed_gradients_[{global - 1, m}] = gradient;
}

MicroBatchLosses PipelineSchedule::evaluate(const std::vector<data::MicroBatch>& micro_batches,
                                            MicroBatchWork& work) {
  const auto& placement = stage_.placement();
  const int64_t rank = group_->rank(), last_chunk = placement.chunks() - 1;
  const auto count = static_cast<int64_t>(micro_batches.size());
  const auto device_options = torch::TensorOptions().device(device_);
  MicroBatchLosses total;
  for (int64_t m = 0; m < count; ++m)
    for (int64_t v = 0; v < placement.virtual_stages; ++v) {
      const int64_t chunk = placement.global_chunk(rank, v);
      torch::Tensor input;
      if (chunk > 0) input = take_input(chunk, m, device_options);
      const auto& batch = micro_batches[static_cast<size_t>(m)];
      auto out = run_chunk(v, input, [&](const parallel::PipelineChunk& part, const torch::Tensor& x) {
        return work.forward_chunk_only(part, batch, x);
      });
      if (chunk == last_chunk)
        total.add(out.losses);
      else
        give_output(chunk, m, out.output);
    }
  for (auto& pending : sends_) pending.wait();
  sends_.clear();
  in_flight_.clear();
  return total;
}

MicroBatchLosses PipelineSchedule::run(const std::vector<data::MicroBatch>& micro_batches, MicroBatchWork& work) {
  const auto& placement = stage_.placement();
  const int64_t stages = placement.stages, rank = group_->rank(), last_chunk = placement.chunks() - 1;
  const auto count = static_cast<int64_t>(micro_batches.size());
  idle_seconds_ = 0;
  peak_in_flight_ = 0;
  passes_ = {};
  auto timed = [](double& seconds, double& cpu_seconds, auto&& pass) {
    const auto started = std::chrono::steady_clock::now();
    const double cpu_started = util::thread_cpu_seconds();
    pass();
    cpu_seconds += util::thread_cpu_seconds() - cpu_started;
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  struct Saved {
    torch::Tensor input, output;
  };
  std::map<std::pair<int64_t, int64_t>, Saved> saved;  // by (chunk, micro batch)
  // Split backwards: each B's weight-gradient records until its W, by (chunk, micro batch).
  std::map<std::pair<int64_t, int64_t>, std::vector<model::DeferredWeightGrad>> deferred;
  const bool splits = config::splits_backward(schedule_);
  MicroBatchLosses total;
  const auto device_options = torch::TensorOptions().device(device_);
  for (const auto& action : pipeline_actions(schedule_, stages, placement.virtual_stages, rank, count)) {
    const int64_t chunk = placement.global_chunk(rank, action.chunk), m = action.micro_batch;
    auto& batch = micro_batches[static_cast<size_t>(m)];
    if (action.forward) {
      torch::Tensor input;
      if (chunk > 0) input = take_input(chunk, m, device_options).requires_grad_(true);
      ChunkOutput out;
      timed(passes_.forward, passes_.forward_cpu, [&] {
        std::optional<model::WeightGradStore::Scope> split;
        if (splits) split.emplace(weight_grads_);
        out = run_chunk(action.chunk, input, [&](const parallel::PipelineChunk& part, const torch::Tensor& x) {
          return work.forward_chunk(part, batch, m, count, x);
        });
      });
      total.add(out.losses);  // the loss on the last chunk, every chunk's router figures
      if (chunk != last_chunk) give_output(chunk, m, out.output);
      saved[{action.chunk, m}] = {input, out.output};
      peak_in_flight_ = std::max(peak_in_flight_, static_cast<int64_t>(saved.size() + deferred.size()));
      continue;
    }
    if (action.part == PipelineAction::Part::weight) {
      auto records = deferred.extract({action.chunk, m});
      TORCH_CHECK(!records.empty(), "pipeline: weight gradients of chunk ", chunk, " micro batch ", m,
                  " before its input gradient");
      timed(passes_.weight, passes_.weight_cpu, [&] {
        for (const auto& record : records.mapped()) record.run();
      });
      continue;
    }
    auto node = saved.extract({action.chunk, m});
    TORCH_CHECK(!node.empty(), "pipeline: backward of chunk ", chunk, " micro batch ", m, " before its forward");
    auto& [input, output] = node.mapped();
    torch::Tensor gradient;
    if (chunk != last_chunk) gradient = take_gradient(chunk, m, output.options());
    timed(passes_.backward, passes_.backward_cpu, [&] { gradient.defined() ? output.backward(gradient) : output.backward(); });
    if (chunk > 0) give_input_gradient(chunk, m, input.grad());
    if (action.part == PipelineAction::Part::input) {
      deferred[{action.chunk, m}] = weight_grads_.take();
    } else if (splits) {
      // dualpipev's whole backwards: the forward deferred the weight gradients, which are due now.
      timed(passes_.weight, passes_.weight_cpu, [&] {
        for (const auto& record : weight_grads_.take()) record.run();
      });
    }
  }
  TORCH_CHECK(deferred.empty(), "pipeline: ", deferred.size(), " micro batches' weight gradients never ran");
  TORCH_CHECK(handed_inputs_.empty() && handed_gradients_.empty(), "pipeline: a hand-over was never taken");
  for (auto& pending : sends_) pending.wait();
  sends_.clear();
  in_flight_.clear();
  return total;
}

}  // namespace xtrain::train
