#include <catch2/catch.hpp>

#include <string>

#include "util/input_error.h"
#include "util/numeric_fault.h"

using xtrain::InputError;
using xtrain::util::NumericFaultKind;
using xtrain::util::parse_numeric_fault;

TEST_CASE("XTRAIN_NUMERIC_FAULT values name a fault, the rank it strikes and its target", "[util][numeric_fault]") {
  CHECK(parse_numeric_fault("", 0).kind == NumericFaultKind::none);
  CHECK_FALSE(parse_numeric_fault("", 0).strikes_here(NumericFaultKind::none));

  const auto scale = parse_numeric_fault("grad_scale:1:model.layers.0.mlp.up_proj.weight", 1);
  CHECK(scale.kind == NumericFaultKind::grad_scale);
  CHECK(scale.rank == 1);
  CHECK(scale.target == "model.layers.0.mlp.up_proj.weight");
  CHECK(scale.strikes_here(NumericFaultKind::grad_scale));
  CHECK_FALSE(scale.strikes_here(NumericFaultKind::grad_divisor));
  CHECK_FALSE(parse_numeric_fault("grad_scale:1:model.norm.weight", 0).strikes_here(NumericFaultKind::grad_scale));

  // Faults without a rank strike every rank.
  CHECK(parse_numeric_fault("rope_shift", 3).strikes_here(NumericFaultKind::rope_shift));
  const auto skip = parse_numeric_fault("skip_reduce_scatter:model.layers.1", 2);
  CHECK(skip.strikes_here(NumericFaultKind::skip_reduce_scatter));
  CHECK(skip.target == "model.layers.1");
  CHECK(parse_numeric_fault("grad_divisor:0", 0).strikes_here(NumericFaultKind::grad_divisor));
  CHECK(parse_numeric_fault("drop_micro_batch:2", 2).strikes_here(NumericFaultKind::drop_micro_batch));
  CHECK(parse_numeric_fault("adamw_decay", 1).strikes_here(NumericFaultKind::adamw_decay));
  CHECK(parse_numeric_fault("adamw_beta2", 0).strikes_here(NumericFaultKind::adamw_beta2));
  CHECK(parse_numeric_fault("adamw_eps", 2).strikes_here(NumericFaultKind::adamw_eps));
  CHECK(parse_numeric_fault("muon_piece", 1).strikes_here(NumericFaultKind::muon_piece));
}

TEST_CASE("a malformed XTRAIN_NUMERIC_FAULT is an input error that says what is expected", "[util][numeric_fault]") {
  const std::string usage =
      "expected grad_scale:<rank>:<parameter>, rope_shift, skip_reduce_scatter:<unit>, grad_divisor:<rank>, "
      "drop_micro_batch:<rank>, adamw_decay, adamw_beta2, adamw_eps, muon_piece or local_negatives";
  CHECK_THROWS_WITH(parse_numeric_fault("grad_sacle:1:x", 0),
                    "XTRAIN_NUMERIC_FAULT=grad_sacle:1:x: unknown fault 'grad_sacle' (" + usage + ")");
  CHECK_THROWS_WITH(parse_numeric_fault("grad_scale:one:x", 0),
                    "XTRAIN_NUMERIC_FAULT=grad_scale:one:x: 'one' is not a rank (" + usage + ")");
  CHECK_THROWS_WITH(parse_numeric_fault("grad_divisor:-1", 0),
                    "XTRAIN_NUMERIC_FAULT=grad_divisor:-1: '-1' is not a rank (" + usage + ")");
  CHECK_THROWS_WITH(parse_numeric_fault("grad_scale:1", 0), "XTRAIN_NUMERIC_FAULT=grad_scale:1: " + usage);
  CHECK_THROWS_WITH(parse_numeric_fault("rope_shift:1", 0), "XTRAIN_NUMERIC_FAULT=rope_shift:1: " + usage);
  CHECK_THROWS_WITH(parse_numeric_fault("adamw_eps:1", 0), "XTRAIN_NUMERIC_FAULT=adamw_eps:1: " + usage);
  CHECK_THROWS_WITH(parse_numeric_fault("skip_reduce_scatter:", 0),
                    "XTRAIN_NUMERIC_FAULT=skip_reduce_scatter:: " + usage);
  CHECK_THROWS_AS(parse_numeric_fault("drop_micro_batch:2x", 0), InputError);
}
