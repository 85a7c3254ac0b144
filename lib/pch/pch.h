// Precompiled header shared by every xtrain target: the LibTorch API and the few
// third-party headers that nearly every translation unit uses.
#pragma once
#include <torch/torch.h>
#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
#include <map>
#include <memory>
#include <optional>
#include <functional>
