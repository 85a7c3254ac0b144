#include "util/numeric_fault.h"

#include <cstdlib>

#include <fmt/format.h>

namespace xtrain::util {

const NumericFault& numeric_fault() {
  static const NumericFault fault = [] {
    const std::string spec = numeric_fault_value_from_environment();
    if (spec.empty()) return NumericFault{};
    const char* rank = std::getenv("RANK");
    auto parsed = parse_numeric_fault(spec, rank && *rank ? std::atoll(rank) : 0);
    fmt::print(stderr, "XTRAIN_NUMERIC_FAULT={}: this run computes wrong numbers on purpose (a test of the tests)\n",
               spec);
    return parsed;
  }();
  return fault;
}

}  // namespace xtrain::util
