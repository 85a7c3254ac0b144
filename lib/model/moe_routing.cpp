#include "model/moe_routing.h"

#include <torch/torch.h>

namespace xtrain::model {

bool balance_deferred(const ModelConfig& c, bool over_context_ranks) {
  return c.num_experts > 0 && c.router_aux_loss_coef > 0 &&
         (c.router_aux_loss_scope == AuxLossScope::model || c.router_aux_loss_global_average || over_context_ranks);
}

namespace {

// The coefficients of each MoE layer's summed router probabilities P_l,e in the balancing loss,
// and the loss they give on this rank. With counts C and T tokens, of this micro batch (on all of its cp ranks) or
// (global average) of every rank's, T_r this rank's: per layer, coef / L * E C_l,e / (k T T_r);
// transformers' scope, every layer alike, coef * E (sum_l C_l,e) / (k L^2 T T_r). Summed over
// the ranks with their loss weights (T_r / T), these are the global batch's losses.
// `layers`: the model's MoE layers, of which `moe_layers` are those this forward ran (a pipeline
// chunk's: its share of the loss).
torch::Tensor fill_balance_coefficients(const ModelConfig& c, const torch::Tensor& coefficients,
                                        const std::vector<int64_t>& moe_layers, int64_t layers,
                                        const torch::Tensor& counts, const torch::Tensor& prob_sums, double tokens,
                                        const RankSum& sum_over_data_ranks, const RankSum& sum_over_context_ranks) {
  torch::NoGradGuard no_grad;
  auto totals = torch::cat({counts.reshape(-1), torch::full({1}, tokens, counts.options())}).to(torch::kFloat64);
  if (c.router_aux_loss_global_average && sum_over_data_ranks)
    sum_over_data_ranks(totals);
  else if (sum_over_context_ranks)
    sum_over_context_ranks(totals);
  auto global_counts = totals.narrow(0, 0, counts.numel()).view(counts.sizes());
  const double global_tokens = totals[-1].item<double>();
  const double base = static_cast<double>(c.num_experts) /
                      (static_cast<double>(c.num_experts_per_tok) * global_tokens * tokens) * c.router_aux_loss_coef;
  const auto rows = c.router_aux_loss_scope == AuxLossScope::model
                        ? global_counts.sum(0, /*keepdim=*/true).expand_as(global_counts) * (base / double(layers * layers))
                        : global_counts * (base / static_cast<double>(layers));
  const auto mine = rows.to(coefficients.scalar_type());
  for (size_t i = 0; i < moe_layers.size(); ++i) coefficients[moe_layers[i]].copy_(mine[static_cast<int64_t>(i)]);
  return (mine * prob_sums).sum();
}

}  // namespace

void collect_routing(const ModelConfig& c, const std::vector<RoutingReport>& reports, const torch::Tensor& coefficients,
                     const RankSum& sum_over_data_ranks, const RankSum& sum_over_context_ranks, ModelOutput& output) {
  torch::Tensor balance, z;  // sums over the layers
  std::vector<int64_t> moe_layers;
  std::vector<torch::Tensor> loads, prob_sums;
  std::vector<double> dropped;
  for (size_t i = 0; i < reports.size(); ++i) {
    const auto& report = reports[i];
    if (!report.load.defined()) continue;  // a dense layer
    moe_layers.push_back(static_cast<int64_t>(i));
    loads.push_back(report.load);
    prob_sums.push_back(report.prob_sums);
    dropped.push_back(report.dropped);
    if (report.balance.defined()) balance = balance.defined() ? balance + report.balance : report.balance;
    if (report.z.defined()) z = z.defined() ? z + report.z : report.z;
  }
  if (loads.empty()) return;  // first_k_dense covers every layer
  output.expert_load = torch::stack(loads);
  output.dropped = torch::tensor(dropped, output.expert_load.options());
  if (coefficients.defined())
    balance = fill_balance_coefficients(c, coefficients, moe_layers, static_cast<int64_t>(moe_layers.size()),
                                        output.expert_load, torch::stack(prob_sums),
                                        reports[static_cast<size_t>(moe_layers[0])].tokens, sum_over_data_ranks,
                                        sum_over_context_ranks);
  if (c.router_aux_loss_coef > 0 && balance.defined()) output.aux_losses.emplace_back("load_balancing", balance);
  if (c.router_z_loss_coef > 0 && z.defined()) output.aux_losses.emplace_back("router_z", z);
}

// Every stage reports the same names and shapes, zeros for what it does not hold, so that the
// figures sum over the pipeline group at the step's end.
void chunk_routing(const ModelConfig& c, const std::vector<RoutingReport>& reports, int64_t first_layer,
                   const torch::Tensor& coefficients, const RankSum& sum_over_context_ranks,
                   const torch::Device& device, ModelOutput& output) {
  const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  std::vector<int64_t> moe_layers;
  for (int64_t layer = 0; layer < c.num_layers + c.mtp_layers; ++layer)  // the prediction depths' too, as forward's
    if (c.is_moe_layer(layer)) moe_layers.push_back(layer);
  if (moe_layers.empty()) return;
  output.expert_load = torch::zeros({static_cast<int64_t>(moe_layers.size()), c.num_experts}, options);
  output.dropped = torch::zeros({static_cast<int64_t>(moe_layers.size())}, options);
  auto balance = torch::zeros({}, options), z = torch::zeros({}, options);
  torch::NoGradGuard no_grad;
  std::vector<int64_t> mine;  // the chunk's MoE layers
  std::vector<torch::Tensor> counts, prob_sums;
  for (size_t row = 0; row < moe_layers.size(); ++row) {
    const int64_t index = moe_layers[row] - first_layer;
    if (index < 0 || index >= static_cast<int64_t>(reports.size())) continue;
    const auto& report = reports[static_cast<size_t>(index)];
    output.expert_load[static_cast<int64_t>(row)].copy_(report.load);
    output.dropped[static_cast<int64_t>(row)].fill_(report.dropped);
    if (report.balance.defined()) balance = balance + report.balance;
    if (report.z.defined()) z = z + report.z;
    mine.push_back(moe_layers[row]);
    counts.push_back(report.load);
    prob_sums.push_back(report.prob_sums);
  }
  // Deferred (the micro batch spans the cp ranks): the chunk's layers' coefficients from the
  // counts of all of its cp ranks.
  if (coefficients.defined() && !mine.empty())
    balance = fill_balance_coefficients(c, coefficients, mine, static_cast<int64_t>(moe_layers.size()),
                                        torch::stack(counts), torch::stack(prob_sums),
                                        reports[static_cast<size_t>(mine[0] - first_layer)].tokens, RankSum(),
                                        sum_over_context_ranks)
                  .to(options.dtype());
  if (c.router_aux_loss_coef > 0) output.aux_losses.emplace_back("load_balancing", balance);
  if (c.router_z_loss_coef > 0) output.aux_losses.emplace_back("router_z", z);
}

}  // namespace xtrain::model
