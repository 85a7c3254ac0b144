#include "config/recipe_loader.h"

#include <filesystem>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "config/foreign_keys.h"
#include "config/hf_import.h"
#include "config/option_registry.h"
#include "config/recipe_rule.h"
#include "data/sources/text_source.h"
#include "text/tokenizer.h"
#include "util/durable_file.h"

namespace xtrain::config {

namespace {

std::string mark_text(const std::string& file, const YAML::Mark& mark) {
  return fmt::format("{}:{}:{}", file, mark.line + 1, mark.column + 1);
}

// Builds one Recipe from a YAML document and overrides, collecting every problem.
class RecipeBuilder {
 public:
  RecipeBuilder(std::string display_name, const LoadOptions& options)
      : report_(std::move(display_name)), options_(options),
        registry_(OptionRegistry::instance()), recipe_(registry_.defaults()) {}

  Recipe build(const std::string& text) {
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::ParserException& e) {
      report(mark_text(file(), e.mark), "", "invalid YAML: " + e.msg);
      throw RecipeError(report_.diagnostics());
    }
    read_document(root);
    for (const auto& override_text : options_.overrides) apply_override(override_text);
    report_missing_keys();
    resolve_derived();
    // Each feature's rules (config/rules/), on the resolved recipe.
    apply_recipe_rules({recipe_, report_, tokenizer_vocab_});
    if (options_.check_files) report_missing_files();
    if (!report_.empty()) throw RecipeError(report_.diagnostics());
    return recipe_;
  }

 private:
  const std::string& file() const { return report_.file(); }
  void report(std::string where, std::string key, std::string message) {
    report_.add(std::move(where), std::move(key), std::move(message));
  }
  std::string where(const std::string& path) const { return report_.where(path); }

  void report_unknown(const std::string& where, const std::string& path) {
    if (auto hint = foreign_key_hint(path)) return report(where, path, fmt::format("unknown key ({})", *hint));
    auto suggestion = registry_.suggest(path);
    report(where, path,
           suggestion ? fmt::format("unknown key (did you mean {}?)", *suggestion)
                      : std::string("unknown key (run `xtrain options` for the list of keys)"));
  }

  void assign(const Option& option, const YAML::Node& value, const std::string& where) {
    if (auto problem = option.assign(value, recipe_)) report(where, option.path, *problem);
    report_.set_at(option.path, where);
  }

  void read_document(const YAML::Node& root) {
    if (root.IsNull()) {
      report(file() + ":1:1", "", "the recipe is empty (start with `name: my-run`)");
      return;
    }
    if (!root.IsMap()) {
      report(mark_text(file(), root.Mark()), "",
             "a recipe is a mapping of sections (name:, model:, data:, train:, ...)");
      return;
    }
    for (const auto& entry : root) {
      const std::string key = entry.first.Scalar();
      const std::string key_where = mark_text(file(), entry.first.Mark());
      if (const Option* option = registry_.find(key)) {
        assign(*option, entry.second, mark_text(file(), entry.second.Mark()));
      } else if (registry_.is_section(key)) {
        read_section(key, entry.second, key_where);
      } else {
        report_unknown(key_where, key);
      }
    }
  }

  void read_section(const std::string& section, const YAML::Node& node, const std::string& where) {
    if (node.IsNull()) return;
    if (!node.IsMap()) {
      report(where, section, "expected a mapping of keys under this section");
      return;
    }
    for (const auto& entry : node) {
      const std::string path = section + "." + entry.first.Scalar();
      if (const Option* option = registry_.find(path)) {
        assign(*option, entry.second, mark_text(file(), entry.second.Mark()));
        report_.set_at(path, mark_text(file(), entry.first.Mark()));
      } else if (entry.second.IsMap() && has_keys_under(path)) {  // model: {lora: {rank: 8}}
        read_section(path, entry.second, mark_text(file(), entry.first.Mark()));
      } else {
        report_unknown(mark_text(file(), entry.first.Mark()), path);
      }
    }
  }

  // Whether options are registered under `prefix.` (a nested mapping such as model.lora).
  bool has_keys_under(const std::string& prefix) const {
    for (const auto& option : registry_.options())
      if (option.path.rfind(prefix + ".", 0) == 0) return true;
    return false;
  }

  void apply_override(const std::string& text) {
    const std::string where = "--set " + text;
    auto equals = text.find('=');
    if (equals == std::string::npos || equals == 0) {
      report(where, "", "expected key.path=value, e.g. --set train.steps=100");
      return;
    }
    const std::string path = text.substr(0, equals);
    const Option* option = registry_.find(path);
    if (!option) {
      report_unknown(where, path);
      return;
    }
    YAML::Node value;
    try {
      value = YAML::Load(text.substr(equals + 1));
    } catch (const YAML::ParserException& e) {
      report(where, path, "invalid YAML value: " + e.msg);
      return;
    }
    assign(*option, value, where);
  }

  void report_missing_keys() {
    for (const auto& option : registry_.options())
      if (option.required && !report_.is_set(option.path))
        report(file() + ":1:1", option.path,
               fmt::format("required key missing (add `{}: ...` to the recipe)", option.path));
  }

  void resolve_derived() {
    // A checkpoint's copy of the recipe (check_files off) has the folder's shape already, and
    // the folder may be gone.
    if (options_.check_files && !import_from_hf(recipe_, report_)) throw RecipeError(report_.diagnostics());
    auto& m = recipe_.model;
    if (recipe_.run.dir.empty()) recipe_.run.dir = "runs/" + recipe_.name;
    if (m.num_kv_heads == 0) m.num_kv_heads = m.num_heads;
    if (m.max_seq_len == 0) m.max_seq_len = recipe_.data.seq_len;
    if (m.intermediate_size == 0) m.intermediate_size = (8 * m.hidden_size / 3 + 63) / 64 * 64;
    if (auto problem = text::check_tokenizer_spec(recipe_.data.tokenizer)) {
      report(where("data.tokenizer"), "data.tokenizer", *problem);
    } else {
      tokenizer_vocab_ = text::make_tokenizer(recipe_.data.tokenizer)->vocab_size();
      if (m.vocab_size == 0) m.vocab_size = tokenizer_vocab_;
    }
  }

  void report_missing_files() {
    if (auto problem = data::check_source(recipe_.data.train))
      report(where("data.train"), "data.train", *problem);
    if (!recipe_.data.eval.empty())
      if (auto problem = data::check_source(recipe_.data.eval))
        report(where("data.eval"), "data.eval", *problem);
    const auto& resume = recipe_.checkpoint.resume;
    if (resume.kind == ResumeKind::folder && !std::filesystem::is_directory(resume.folder))
      report(where("checkpoint.resume"), "checkpoint.resume",
             fmt::format("checkpoint folder not found: {} (use auto, strict, never, or a checkpoint folder)",
                         resume.folder));
  }

  RecipeReport report_;
  const LoadOptions& options_;
  const OptionRegistry& registry_;
  Recipe recipe_;
  int64_t tokenizer_vocab_ = 0;
};

}  // namespace

Recipe load_recipe_text(const std::string& text, const std::string& display_name,
                        const LoadOptions& options) {
  return RecipeBuilder(display_name, options).build(text);
}

Recipe load_recipe(const std::string& path, const LoadOptions& options) {
  // A recipe is settings, not data: parsing YAML takes ~200 bytes of memory per value, so a file
  // of tens of MB (a data file passed by mistake) would take gigabytes.
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  if (!error && size > kMaxRecipeBytes)
    throw RecipeError({{path, "",
                        fmt::format("the file is {:.1f} MB; recipes are limited to {} MB (is it a data file? name "
                                    "data files in data.train)",
                                    static_cast<double>(size) / 1e6, kMaxRecipeBytes / 1000000)}});
  std::string text;
  try {
    text = util::read_file(path);
  } catch (const InputError& e) {
    throw RecipeError({{path, "", "cannot read the recipe (check the path)"}});
  }
  return load_recipe_text(text, path, options);
}

int64_t health_interval(const std::string& value) {
  if (value == "off") return -1;
  if (value == "start") return 0;
  static const std::string prefix = "every_";
  if (value.rfind(prefix, 0) != 0 || value.size() == prefix.size()) return -2;
  const auto digits = value.substr(prefix.size());
  if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) return -2;
  const int64_t n = std::stoll(digits);
  return n >= 1 ? n : -2;
}

std::string dump_recipe(const Recipe& recipe) {
  std::string text;
  std::string section;
  for (const auto& option : OptionRegistry::instance().options()) {
    auto dot = option.path.find('.');
    std::string option_section = dot == std::string::npos ? "" : option.path.substr(0, dot);
    if (option_section != section && !option_section.empty()) text += option_section + ":\n";
    section = option_section;
    std::string leaf = dot == std::string::npos ? option.path : option.path.substr(dot + 1);
    text += fmt::format("{}{}: {}\n", section.empty() ? "" : "  ", leaf, option.render(recipe));
  }
  return text;
}

std::string options_markdown() {
  std::string text = "| key | type | default | meaning |\n|---|---|---|---|\n";
  for (const auto& option : OptionRegistry::instance().options()) {
    std::string default_text = option.required ? "required" : "`" + option.default_text + "`";
    text += fmt::format("| `{}` | {} | {} | {} |\n", option.path, value_type_name(option.type),
                        default_text, option.doc);
  }
  return text;
}

}  // namespace xtrain::config
