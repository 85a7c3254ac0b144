// The closed choices of recipe keys that belong to no lower layer (those of the model, the
// memory policy, the optimizer's schedule and the device live with them). Each value parses
// once, when the recipe loads, and the code compares enums; the names are what recipes, dumped
// recipes, metrics and logs spell (util/choice.h).
#pragma once
#include <string>

#include "util/choice.h"

namespace xtrain::config {

enum class Dtype { fp32, bf16, fp16 };                         // train.dtype
enum class OmpWaitPolicy { automatic, library_default, passive, active };  // train.omp_wait_policy
enum class Spike { off, skip, rollback };                      // train.spike
enum class Objective { clm, mlm, dpo, span_corruption, grpo };  // data.objective
enum class DpoLoss { sigmoid, ipo };                           // dpo.loss
enum class GrpoLoss { grpo, bnpo, dr_grpo, dapo };             // grpo.loss_type
enum class GrpoRewardScaling { group, batch, none };           // grpo.scale_rewards
enum class GrpoRatioLevel { token, sequence };                 // grpo.importance_sampling_level
enum class GrpoReward { exact_match, number_match, format, overlong, command };  // grpo.rewards
enum class Optimizer { adamw, onebit_adam, muon };             // optim.name
enum class MuonAdjustLr { original, match_rms_adamw };         // optim.muon.adjust_lr
enum class MuonNsDtype { bf16, fp32 };                         // optim.muon.ns_dtype
enum class PpSchedule { gpipe, one_f_one_b, interleaved_1f1b, zb_h1, zbv, dualpipev };  // parallel.pp_schedule
enum class Backend { automatic, gloo, nccl };                  // dist.backend
enum class HealthAction { stop, warn };                        // dist.health_action
enum class Float8GradFormat { automatic, e4m3, e5m2 };         // precision.fp8_grad
enum class Float8AllGather { automatic, on, off };             // precision.fp8_all_gather

// checkpoint.resume: one of its words, or a checkpoint folder (then `folder` holds the path).
enum class ResumeKind { automatic, strict, never, folder };
struct Resume {
  ResumeKind kind = ResumeKind::automatic;
  std::string folder;
};

XTRAIN_CHOICES_BEGIN
constexpr const char* to_string(Dtype value) {
  switch (value) {
    case Dtype::fp32: return "fp32";
    case Dtype::bf16: return "bf16";
    case Dtype::fp16: return "fp16";
  }
  return nullptr;
}

constexpr const char* to_string(OmpWaitPolicy value) {
  switch (value) {
    case OmpWaitPolicy::automatic: return "auto";
    case OmpWaitPolicy::library_default: return "default";
    case OmpWaitPolicy::passive: return "passive";
    case OmpWaitPolicy::active: return "active";
  }
  return nullptr;
}

constexpr const char* to_string(Spike value) {
  switch (value) {
    case Spike::off: return "off";
    case Spike::skip: return "skip";
    case Spike::rollback: return "rollback";
  }
  return nullptr;
}

constexpr const char* to_string(Objective value) {
  switch (value) {
    case Objective::clm: return "clm";
    case Objective::mlm: return "mlm";
    case Objective::dpo: return "dpo";
    case Objective::span_corruption: return "span_corruption";
    case Objective::grpo: return "grpo";
  }
  return nullptr;
}

constexpr const char* to_string(DpoLoss value) {
  switch (value) {
    case DpoLoss::sigmoid: return "sigmoid";
    case DpoLoss::ipo: return "ipo";
  }
  return nullptr;
}

constexpr const char* to_string(GrpoLoss value) {
  switch (value) {
    case GrpoLoss::grpo: return "grpo";
    case GrpoLoss::bnpo: return "bnpo";
    case GrpoLoss::dr_grpo: return "dr_grpo";
    case GrpoLoss::dapo: return "dapo";
  }
  return nullptr;
}

constexpr const char* to_string(GrpoRewardScaling value) {
  switch (value) {
    case GrpoRewardScaling::group: return "group";
    case GrpoRewardScaling::batch: return "batch";
    case GrpoRewardScaling::none: return "none";
  }
  return nullptr;
}

constexpr const char* to_string(GrpoRatioLevel value) {
  switch (value) {
    case GrpoRatioLevel::token: return "token";
    case GrpoRatioLevel::sequence: return "sequence";
  }
  return nullptr;
}

constexpr const char* to_string(GrpoReward value) {
  switch (value) {
    case GrpoReward::exact_match: return "exact_match";
    case GrpoReward::number_match: return "number_match";
    case GrpoReward::format: return "format";
    case GrpoReward::overlong: return "overlong";
    case GrpoReward::command: return "command";
  }
  return nullptr;
}

constexpr const char* to_string(Optimizer value) {
  switch (value) {
    case Optimizer::adamw: return "adamw";
    case Optimizer::onebit_adam: return "onebit_adam";
    case Optimizer::muon: return "muon";
  }
  return nullptr;
}

constexpr const char* to_string(MuonAdjustLr value) {
  switch (value) {
    case MuonAdjustLr::original: return "original";
    case MuonAdjustLr::match_rms_adamw: return "match_rms_adamw";
  }
  return nullptr;
}

constexpr const char* to_string(MuonNsDtype value) {
  switch (value) {
    case MuonNsDtype::bf16: return "bf16";
    case MuonNsDtype::fp32: return "fp32";
  }
  return nullptr;
}

constexpr const char* to_string(PpSchedule value) {
  switch (value) {
    case PpSchedule::gpipe: return "gpipe";
    case PpSchedule::one_f_one_b: return "1f1b";
    case PpSchedule::interleaved_1f1b: return "interleaved_1f1b";
    case PpSchedule::zb_h1: return "zb_h1";
    case PpSchedule::zbv: return "zbv";
    case PpSchedule::dualpipev: return "dualpipev";
  }
  return nullptr;
}

constexpr const char* to_string(Backend value) {
  switch (value) {
    case Backend::automatic: return "auto";
    case Backend::gloo: return "gloo";
    case Backend::nccl: return "nccl";
  }
  return nullptr;
}

// The words only: a folder is spelled by its path (resume_text).
constexpr const char* to_string(ResumeKind value) {
  switch (value) {
    case ResumeKind::automatic: return "auto";
    case ResumeKind::strict: return "strict";
    case ResumeKind::never: return "never";
    case ResumeKind::folder: return "folder";
  }
  return nullptr;
}
constexpr const char* to_string(Float8GradFormat value) {
  switch (value) {
    case Float8GradFormat::automatic: return "auto";
    case Float8GradFormat::e4m3: return "e4m3";
    case Float8GradFormat::e5m2: return "e5m2";
  }
  return nullptr;
}

constexpr const char* to_string(Float8AllGather value) {
  switch (value) {
    case Float8AllGather::automatic: return "auto";
    case Float8AllGather::on: return "on";
    case Float8AllGather::off: return "off";
  }
  return nullptr;
}

constexpr const char* to_string(HealthAction value) {
  switch (value) {
    case HealthAction::stop: return "stop";
    case HealthAction::warn: return "warn";
  }
  return nullptr;
}
XTRAIN_CHOICES_END

// checkpoint.resume's text: a word parses as its kind, anything else is a folder.
inline Resume parse_resume(const std::string& text) {
  for (auto kind : {ResumeKind::automatic, ResumeKind::strict, ResumeKind::never})
    if (text == to_string(kind)) return {kind, ""};
  return {ResumeKind::folder, text};
}
inline std::string resume_text(const Resume& resume) {
  return resume.kind == ResumeKind::folder ? resume.folder : to_string(resume.kind);
}

}  // namespace xtrain::config
