// The recipe loader on arbitrary YAML. A recipe that loads dumps to YAML that loads again to
// the same dump (dump_recipe is what a checkpoint stores and `xtrain resume` reads back).
#include "config/recipe_loader.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace xtrain;
  config::LoadOptions options;
  options.check_files = false;  // no file named by the recipe is read
  std::string dumped;
  fuzz::expect_only_input_errors([&] {
    dumped = config::dump_recipe(config::load_recipe_text(std::string(fuzz::as_text(data, size)),
                                                          "fuzz.yaml", options));
  });
  if (!dumped.empty()) {
    const std::string again = config::dump_recipe(config::load_recipe_text(dumped, "dump.yaml", options));
    fuzz::require(again == dumped, "dump_recipe(load(dump_recipe(r))) == dump_recipe(r)");
  }
  return 0;
}
