#include "util/numeric_fault.h"

#include <cstdlib>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "util/input_error.h"

namespace xtrain::util {

namespace {

constexpr const char* kUsage =
    "expected grad_scale:<rank>:<parameter>, rope_shift, skip_reduce_scatter:<unit>, grad_divisor:<rank>, "
    "drop_micro_batch:<rank>, adamw_decay, adamw_beta2 or adamw_eps";

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, ':');) parts.push_back(part);
  return parts;
}

int64_t parse_rank(const std::string& spec, const std::string& text) {
  size_t used = 0;
  int64_t rank = -1;
  try {
    rank = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || rank < 0)
    throw InputError(fmt::format("XTRAIN_NUMERIC_FAULT={}: '{}' is not a rank ({})", spec, text, kUsage));
  return rank;
}

}  // namespace

bool NumericFault::strikes_here(NumericFaultKind k) const {
  return kind != NumericFaultKind::none && kind == k && (rank < 0 || rank == this_rank);
}

NumericFault parse_numeric_fault(const std::string& spec, int64_t this_rank) {
  NumericFault fault;
  fault.this_rank = this_rank;
  if (spec.empty()) return fault;
  const auto parts = split(spec);
  const std::string kind = parts.empty() ? "" : parts[0];
  auto expect_arguments = [&](size_t count) {
    if (parts.size() != count + 1 || (count > 0 && parts.back().empty()))
      throw InputError(fmt::format("XTRAIN_NUMERIC_FAULT={}: {}", spec, kUsage));
  };
  if (kind == "grad_scale") {
    expect_arguments(2);
    fault = {NumericFaultKind::grad_scale, parse_rank(spec, parts[1]), parts[2], this_rank};
  } else if (kind == "rope_shift") {
    expect_arguments(0);
    fault = {NumericFaultKind::rope_shift, -1, "", this_rank};
  } else if (kind == "adamw_decay" || kind == "adamw_beta2" || kind == "adamw_eps") {
    expect_arguments(0);
    const auto optimizer_fault = kind == "adamw_decay"   ? NumericFaultKind::adamw_decay
                                 : kind == "adamw_beta2" ? NumericFaultKind::adamw_beta2
                                                         : NumericFaultKind::adamw_eps;
    fault = {optimizer_fault, -1, "", this_rank};
  } else if (kind == "skip_reduce_scatter") {
    expect_arguments(1);
    fault = {NumericFaultKind::skip_reduce_scatter, -1, parts[1], this_rank};
  } else if (kind == "grad_divisor" || kind == "drop_micro_batch") {
    expect_arguments(1);
    fault = {kind == "grad_divisor" ? NumericFaultKind::grad_divisor : NumericFaultKind::drop_micro_batch,
             parse_rank(spec, parts[1]), "", this_rank};
  } else {
    throw InputError(fmt::format("XTRAIN_NUMERIC_FAULT={}: unknown fault '{}' ({})", spec, kind, kUsage));
  }
  return fault;
}

const NumericFault& numeric_fault() {
  static const NumericFault fault = [] {
    const char* spec = std::getenv("XTRAIN_NUMERIC_FAULT");
    if (!spec || !*spec) return NumericFault{};
    const char* rank = std::getenv("RANK");
    auto parsed = parse_numeric_fault(spec, rank && *rank ? std::atoll(rank) : 0);
    fmt::print(stderr, "XTRAIN_NUMERIC_FAULT={}: this run computes wrong numbers on purpose (a test of the tests)\n",
               spec);
    return parsed;
  }();
  return fault;
}

}  // namespace xtrain::util
