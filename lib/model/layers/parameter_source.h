// Models are built without parameter storage and materialised afterwards, each rank filling only
// what it keeps. A parameter starts as a stand-in: its full shape over a single element (zero
// strides), so that shapes, names and the module tree exist while no memory does. (LibTorch's
// meta device would say the same, but set_data cannot move a parameter from the meta device to
// a real one in place, and FSDP repoints parameters with set_data.)
//
// A ParameterSource gives any slice of any parameter: elements [begin, begin + count) of its
// row-major flattening, as a 1-D fp32 tensor. Seeded initialisation (model/layers/parameter_init.h),
// a Hugging Face folder and a checkpoint are sources; FSDP asks one for its shard only.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include <torch/nn/module.h>
#include <torch/types.h>

namespace xtrain::model {

using ParameterSource = std::function<torch::Tensor(const std::string& name, int64_t begin, int64_t count)>;

// A stand-in of this shape, on the CPU.
torch::Tensor unmaterialized(torch::IntArrayRef shape);
bool is_materialized(const torch::Tensor& parameter);

// Moves the module's stand-ins and its buffers to `device`, allocating nothing for parameters.
void place_unmaterialized(torch::nn::Module& module, const torch::Device& device);
// Fills every parameter whole from `source`, on the device its stand-in is on.
void materialize(torch::nn::Module& module, const ParameterSource& source);

}  // namespace xtrain::model
