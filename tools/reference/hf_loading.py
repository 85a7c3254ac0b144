"""Loads a Hugging Face folder into a transformers class in float32, quietly, and refuses any
missing, unexpected or mis-shaped tensor, so that a comparison never runs against partly
initialised weights. Shared by the reference scripts beside it."""
import torch


def load_checked(model_class, folder, **kwargs):
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    model, info = model_class.from_pretrained(folder, dtype=torch.float32, output_loading_info=True, **kwargs)
    problems = {k: sorted(str(v) for v in info.get(k, [])) for k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if any(problems.values()):
        raise KeyError(f"checkpoint {folder} does not match {type(model).__name__}: {problems}")
    return model
