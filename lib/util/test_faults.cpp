#include "util/test_faults.h"

#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "util/input_error.h"

namespace xtrain::util {

namespace {

enum class Field { rank, step, steps, name };

struct Argument {
  Field field;
  const char* label;  // as the expected forms show it: <rank>, <parameter>...
};

struct Form {
  const char* kind;
  std::vector<Argument> arguments;
};

struct Variable {
  const char* name;
  std::vector<Form> forms;
};

const Argument kRank{Field::rank, "rank"};
const Argument kStep{Field::step, "step"};
const Argument kSteps{Field::steps, "step"};

const Variable kRunFault{"XTRAIN_FAULT",
                         {{"kill", {kRank, kStep}},
                          {"kill_in_save", {kRank, kStep}},
                          {"stall", {kRank, kStep}},
                          {"stall_in_step", {kRank, kStep}},
                          {"fail", {kRank, kStep}},
                          {"spike", {kRank, kSteps}}}};

const Variable kHealthFault{"XTRAIN_HEALTH_FAULT", {{"slow", {kRank}}, {"corrupt", {kRank}}}};

const Variable kNumericFault{"XTRAIN_NUMERIC_FAULT",
                             {{"grad_scale", {kRank, {Field::name, "parameter"}}},
                              {"rope_shift", {}},
                              {"skip_reduce_scatter", {{Field::name, "unit"}}},
                              {"grad_divisor", {kRank}},
                              {"drop_micro_batch", {kRank}},
                              {"adamw_decay", {}},
                              {"adamw_beta2", {}},
                              {"adamw_eps", {}},
                              {"muon_piece", {}},
                              {"local_negatives", {}}}};

// One value in the grammar: its kind and its fields, each read as its form says.
struct Parsed {
  std::string kind;
  int64_t rank = -1;
  int64_t step = 0, last_step = 0;
  std::string name;
};

std::string form_text(const Form& form) {
  std::string text = form.kind;
  for (const auto& a : form.arguments)
    text += fmt::format(":<{}>{}", a.label, a.field == Field::steps ? "[-<last step>]" : "");
  return text;
}

// "expected a, b or c"
std::string expected(const Variable& variable) {
  std::string text = "expected ";
  for (size_t i = 0; i < variable.forms.size(); ++i)
    text += (i == 0 ? "" : i + 1 == variable.forms.size() ? " or " : ", ") + form_text(variable.forms[i]);
  return text;
}

// Every field, empty ones included: "a::b" is a, "", b.
std::vector<std::string> split_fields(const std::string& value) {
  std::vector<std::string> fields;
  size_t begin = 0;
  for (;;) {
    const size_t end = value.find(':', begin);
    fields.push_back(value.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
    if (end == std::string::npos) return fields;
    begin = end + 1;
  }
}

std::optional<int64_t> whole_number(const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  try {
    return std::stoll(text);
  } catch (const std::exception&) {
    return std::nullopt;  // out of range
  }
}

std::optional<Parsed> parse(const Variable& variable, const std::string& value) {
  if (value.empty()) return std::nullopt;
  auto refuse = [&](const std::string& problem) {
    return InputError(fmt::format("{}={}: {}", variable.name, value,
                                  problem.empty() ? expected(variable) : problem + " (" + expected(variable) + ")"));
  };
  const auto fields = split_fields(value);
  const Form* form = nullptr;
  for (const auto& f : variable.forms)
    if (fields[0] == f.kind) form = &f;
  if (form == nullptr) throw refuse(fmt::format("unknown fault '{}'", fields[0]));
  if (fields.size() != form->arguments.size() + 1) throw refuse("");
  Parsed parsed;
  parsed.kind = fields[0];
  for (size_t i = 0; i < form->arguments.size(); ++i) {
    const std::string& text = fields[i + 1];
    if (text.empty()) throw refuse("");
    switch (form->arguments[i].field) {
      case Field::rank: {
        const auto rank = whole_number(text);
        if (!rank) throw refuse(fmt::format("'{}' is not a rank", text));
        parsed.rank = *rank;
        break;
      }
      case Field::step:
      case Field::steps: {
        const size_t dash = form->arguments[i].field == Field::steps ? text.find('-') : std::string::npos;
        const auto first = whole_number(text.substr(0, dash));
        const auto last = dash == std::string::npos ? first : whole_number(text.substr(dash + 1));
        if (!first || !last || *last < *first)
          throw refuse(fmt::format("'{}' is not a step{}", text,
                                   form->arguments[i].field == Field::steps ? " or a range of steps" : ""));
        parsed.step = *first;
        parsed.last_step = *last;
        break;
      }
      case Field::name: parsed.name = text; break;
    }
  }
  return parsed;
}

std::string environment_value(const Variable& variable) {
  const char* value = std::getenv(variable.name);
  return value ? value : "";
}

}  // namespace

std::optional<RunFault> parse_run_fault(const std::string& value) {
  const auto parsed = parse(kRunFault, value);
  if (!parsed) return std::nullopt;
  return RunFault{parsed->kind, parsed->rank, parsed->step, parsed->last_step};
}

std::optional<RunFault> run_fault_from_environment() { return parse_run_fault(environment_value(kRunFault)); }

HealthFault parse_health_fault(const std::string& value) {
  HealthFault fault;
  if (const auto parsed = parse(kHealthFault, value))
    (parsed->kind == "slow" ? fault.slow_rank : fault.corrupt_rank) = parsed->rank;
  return fault;
}

HealthFault health_fault_from_environment() { return parse_health_fault(environment_value(kHealthFault)); }

bool NumericFault::strikes_here(NumericFaultKind k) const {
  return kind != NumericFaultKind::none && kind == k && (rank < 0 || rank == this_rank);
}

NumericFault parse_numeric_fault(const std::string& value, int64_t this_rank) {
  NumericFault fault;
  fault.this_rank = this_rank;
  const auto parsed = parse(kNumericFault, value);
  if (!parsed) return fault;
  const std::string& k = parsed->kind;
  fault.kind = k == "grad_scale"            ? NumericFaultKind::grad_scale
               : k == "rope_shift"          ? NumericFaultKind::rope_shift
               : k == "skip_reduce_scatter" ? NumericFaultKind::skip_reduce_scatter
               : k == "grad_divisor"        ? NumericFaultKind::grad_divisor
               : k == "drop_micro_batch"    ? NumericFaultKind::drop_micro_batch
               : k == "adamw_decay"         ? NumericFaultKind::adamw_decay
               : k == "adamw_beta2"         ? NumericFaultKind::adamw_beta2
               : k == "adamw_eps"           ? NumericFaultKind::adamw_eps
               : k == "muon_piece"          ? NumericFaultKind::muon_piece
                                            : NumericFaultKind::local_negatives;
  fault.rank = parsed->rank;  // -1 for the kinds that strike every rank
  fault.target = parsed->name;
  return fault;
}

std::string numeric_fault_value_from_environment() { return environment_value(kNumericFault); }

}  // namespace xtrain::util
