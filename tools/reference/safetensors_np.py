"""Minimal safetensors reader/writer built on numpy and torch only.

The reference tools must run where the `safetensors` package is not
installed, so this module implements the (small) file format directly:

    [8 bytes]  little-endian u64 N: length of the JSON header
    [N bytes]  JSON header, padded with spaces:
               {name: {"dtype": "F32", "shape": [..], "data_offsets": [b, e]},
                "__metadata__": {str: str}}
    [...]      raw little-endian tensor bytes; offsets are relative to the
               first byte after the header

Tensors are written in sorted-name order, back to back, and the header is
padded so that the data section starts on an 8-byte boundary.
"""

import json
import struct

import numpy as np
import torch

# safetensors dtype tag -> (torch dtype, numpy dtype used for the raw bytes).
# bfloat16 has no numpy equivalent, so its bits travel as int16.
_DTYPES = {
    "F64": (torch.float64, np.dtype("<f8")),
    "F32": (torch.float32, np.dtype("<f4")),
    "F16": (torch.float16, np.dtype("<f2")),
    "BF16": (torch.bfloat16, np.dtype("<i2")),
    "I64": (torch.int64, np.dtype("<i8")),
    "I32": (torch.int32, np.dtype("<i4")),
    "I16": (torch.int16, np.dtype("<i2")),
    "I8": (torch.int8, np.dtype("i1")),
    "U8": (torch.uint8, np.dtype("u1")),
    "BOOL": (torch.bool, np.dtype("?")),
}
_TAG_OF = {torch_dtype: tag for tag, (torch_dtype, _) in _DTYPES.items()}

# Refuse absurd header lengths early instead of trying to allocate them.
_MAX_HEADER_BYTES = 100 * 1024 * 1024


def _tensor_bytes(tensor):
    """Returns the raw little-endian bytes of a CPU tensor in C order."""
    tensor = tensor.detach().cpu().contiguous()
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.view(torch.int16)
    array = tensor.numpy()
    # numpy keeps native byte order; make the on-disk order explicit.
    return array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()


def save_file(tensors, path, metadata=None):
    """Writes a dict of torch tensors to `path` in safetensors format."""
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}

    blobs = []
    offset = 0
    for name in sorted(tensors):
        tensor = tensors[name]
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(tensor).__name__}")
        if tensor.dtype not in _TAG_OF:
            raise TypeError(f"{name}: unsupported dtype {tensor.dtype}")
        blob = _tensor_bytes(tensor)
        header[name] = {
            "dtype": _TAG_OF[tensor.dtype],
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + len(blob)],
        }
        blobs.append(blob)
        offset += len(blob)

    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header_bytes += b" " * (-len(header_bytes) % 8)

    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        for blob in blobs:
            f.write(blob)


def load_metadata(path):
    """Returns the `__metadata__` dict of a safetensors file ({} if absent)."""
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        if header_len > _MAX_HEADER_BYTES:
            raise ValueError(f"{path}: header length {header_len} is implausible")
        return json.loads(f.read(header_len)).get("__metadata__", {})


def load_file(path):
    """Reads a safetensors file into a dict of CPU torch tensors."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: file too short for a safetensors header")
    (header_len,) = struct.unpack("<Q", data[:8])
    if header_len > min(_MAX_HEADER_BYTES, len(data) - 8):
        raise ValueError(f"{path}: header length {header_len} exceeds the file")
    header = json.loads(data[8:8 + header_len])
    body = memoryview(data)[8 + header_len:]

    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        tag = info["dtype"]
        if tag not in _DTYPES:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {tag}")
        torch_dtype, np_dtype = _DTYPES[tag]
        shape = [int(d) for d in info["shape"]]
        begin, end = (int(o) for o in info["data_offsets"])
        expected = int(np.prod(shape, dtype=np.int64)) * np_dtype.itemsize
        if not 0 <= begin <= end <= len(body) or end - begin != expected:
            raise ValueError(
                f"{path}: tensor {name} has offsets [{begin}, {end}] "
                f"inconsistent with shape {shape} / dtype {tag}")
        # Copy so the tensor owns writable memory independent of `data`.
        array = np.frombuffer(body[begin:end], dtype=np_dtype).astype(
            np_dtype.newbyteorder("="), copy=True).reshape(shape)
        tensor = torch.from_numpy(array)
        if torch_dtype == torch.bfloat16:
            tensor = tensor.view(torch.bfloat16)
        tensors[name] = tensor
    return tensors
