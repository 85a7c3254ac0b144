"""torchao's Float8Linear (emulate mode) on given weights and inputs: the reference xtrain's FP8
linear layer is held to (tests/unit/model/float8_test.cpp).

Reads --inputs (safetensors: x [M, K], weight [N, K], grad_out [M, N]) and writes, for each
recipe (tensorwise, rowwise, rowwise_with_gw_hp) and output-gradient format (e4m3, e5m2), the
layer's output and the
gradients of sum(y * grad_out) with respect to x and the weight, under
"<scaling>.<format>.{y,grad_x,grad_weight}".
"""
import argparse
import dataclasses

import torch
from safetensors.torch import load_file, save_file
from torchao.float8 import Float8LinearConfig, convert_to_float8_training
from torchao.float8.config import CastConfig, ScalingGranularity, ScalingType

FORMATS = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


def config_for(scaling: str, grad_format: str) -> Float8LinearConfig:
    """torchao's recipe of that name, its output gradients in `grad_format` wherever it quantizes
    them (rowwise_with_gw_hp leaves the weight gradient's unquantized)."""
    granularity = ScalingGranularity.TENSORWISE if scaling == "tensorwise" else ScalingGranularity.AXISWISE
    base = Float8LinearConfig.from_recipe_name(scaling)
    grad = CastConfig(scaling_granularity=granularity, target_dtype=FORMATS[grad_format])
    for_weight = grad
    if scaling == "rowwise_with_gw_hp":  # torchao requires the disabled cast to name the same format
        for_weight = CastConfig(scaling_type=ScalingType.DISABLED, target_dtype=FORMATS[grad_format])
    return dataclasses.replace(
        base, cast_config_grad_output=grad, cast_config_grad_output_for_grad_weight=for_weight, emulate=True
    )


def run(tensors: dict, scaling: str, grad_format: str) -> dict:
    x = tensors["x"].clone().requires_grad_(True)
    weight = tensors["weight"]
    layer = torch.nn.Sequential(torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False))
    with torch.no_grad():
        layer[0].weight.copy_(weight)
    convert_to_float8_training(layer, config=config_for(scaling, grad_format))
    assert type(layer[0]).__name__ == "Float8Linear", type(layer[0])
    y = layer(x)
    (y * tensors["grad_out"]).sum().backward()
    prefix = f"{scaling}.{grad_format}."
    return {prefix + "y": y.detach(), prefix + "grad_x": x.grad, prefix + "grad_weight": layer[0].weight.grad}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    tensors = load_file(args.inputs)
    results = {}
    for scaling in ("tensorwise", "rowwise", "rowwise_with_gw_hp"):
        for grad_format in FORMATS:
            results.update(run(tensors, scaling, grad_format))
    save_file({k: v.contiguous() for k, v in results.items()}, args.out)


if __name__ == "__main__":
    main()
