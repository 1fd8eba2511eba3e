"""ONNX tensors stored as external data: read them, refusing paths outside the model's folder."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ....engine.dtypes import ONNX_DTYPES
from ....engine.errors import ModelError


def load_external(tensor, base_dir: Path | None) -> np.ndarray:
    info = {entry.key: entry.value for entry in tensor.external_data}
    if base_dir is None:
        raise ModelError(f'initializer "{tensor.name}" keeps its data in an external file; '
                         "load the model from its path, not from bytes")
    location = info.get("location", "")
    root = base_dir.resolve()
    path = (root / location).resolve()
    if root not in path.parents:
        raise ModelError(f'initializer "{tensor.name}": external data path {location!r} leaves the '
                         f"model's folder {root}")
    if not path.is_file():
        raise ModelError(f'initializer "{tensor.name}": external data file {path} not found')
    dtype = np.dtype(ONNX_DTYPES[tensor.data_type])
    count = int(np.prod(tensor.dims, dtype=np.int64))
    offset = int(info.get("offset", 0))
    length = int(info.get("length", count * dtype.itemsize))
    if length != count * dtype.itemsize or offset + length > path.stat().st_size:
        raise ModelError(f'initializer "{tensor.name}": external data in {path.name} has the wrong '
                         f"size (dims {list(tensor.dims)} need {count * dtype.itemsize} bytes)")
    data = np.fromfile(path, dtype=dtype, count=count, offset=offset)
    return data.reshape(tuple(tensor.dims))
