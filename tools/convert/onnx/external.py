"""ONNX tensors stored as external data: checked, then read.

A location must be a relative path that stays inside the model's folder once symlinks are resolved,
name an existing regular file, and offset + length must lie inside that file and match the
tensor's dims and dtype. Every refusal is a ModelError naming the tensor and the file.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath

import numpy as np

from ....engine.dtypes import ONNX_DTYPES, onnx_type_name
from ....engine.errors import ModelError
from ....models.verify import DEFAULT_LIMITS, Limits, check_dims

EXTERNAL = 1  # TensorProto.DataLocation.EXTERNAL


@dataclass(frozen=True)
class ExternalData:
    """Where a tensor's bytes are: a file inside the model's folder, a byte offset and a count."""

    path: Path
    offset: int
    dtype: np.dtype
    dims: tuple[int, ...]

    @property
    def count(self) -> int:
        return math.prod(self.dims)


def _label(tensor) -> str:
    return f'initializer "{tensor.name}"'


def _integer(tensor, info: dict, key: str, location: str) -> int | None:
    text = info.get(key)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise ModelError(f'{_label(tensor)}: external data {key} {text!r} (file {location!r}) is not an '
                         "integer") from None
    if value < 0:
        raise ModelError(f"{_label(tensor)}: external data {key} {value} (file {location!r}) is negative")
    return value


def locate_external(tensor, base_dir: Path | None, limits: Limits | None = None) -> ExternalData:
    """Check a tensor's external data reference without reading it; raise ModelError if it is bad."""
    label = _label(tensor)
    info = {entry.key: entry.value for entry in tensor.external_data}
    if base_dir is None:
        raise ModelError(f"{label} keeps its data in an external file; load the model from its path, not "
                         "from bytes")
    location = info.get("location", "")
    if not location:
        raise ModelError(f"{label}: external data names no file (empty location)")
    if PurePosixPath(location).is_absolute() or PureWindowsPath(location).is_absolute() or \
            PureWindowsPath(location).drive:
        raise ModelError(f"{label}: external data path {location!r} is absolute; ONNX locations are relative "
                         "to the model's folder")
    root = base_dir.resolve()
    path = (root / location).resolve()  # resolves "..", and symlinks to where they really point
    if root not in path.parents:
        raise ModelError(f"{label}: external data path {location!r} resolves to {path}, outside the model's "
                         f"folder {root}")
    if not path.is_file():
        raise ModelError(f"{label}: external data file {location!r} ({path}) not found or not a regular file")
    if tensor.data_type not in ONNX_DTYPES:
        raise ModelError(f"{label}: external data (file {location!r}) has unsupported ONNX data type "
                         f"{onnx_type_name(tensor.data_type)}")
    dims = tuple(int(d) for d in tensor.dims)
    check_dims(dims, what=f"{label} (external data in {location!r})", origin="ONNX model",
               limits=limits or DEFAULT_LIMITS)
    dtype = np.dtype(ONNX_DTYPES[tensor.data_type]).newbyteorder("<")  # ONNX stores little-endian
    needed = math.prod(dims) * dtype.itemsize
    offset = _integer(tensor, info, "offset", location) or 0
    length = _integer(tensor, info, "length", location)
    if length is not None and length != needed:
        raise ModelError(f"{label}: external data length {length} (file {location!r}) does not match dims "
                         f"{list(dims)} of {dtype.name}, which need {needed} bytes")
    size = path.stat().st_size
    if offset + needed > size:
        raise ModelError(f"{label}: external data at offset {offset} + {needed} bytes runs past the end of "
                         f"{location!r} ({size} bytes)")
    return ExternalData(path, offset, dtype, dims)


def load_external(tensor, base_dir: Path | None, limits: Limits | None = None) -> np.ndarray:
    """The tensor's value, read from its external file after locate_external's checks."""
    where = locate_external(tensor, base_dir, limits)
    if where.count == 0:
        return np.zeros(where.dims, where.dtype.newbyteorder("="))
    data = np.fromfile(where.path, dtype=where.dtype, count=where.count, offset=where.offset)
    if data.size != where.count:  # the file shrank since it was checked
        raise ModelError(f"{_label(tensor)}: external data file {where.path} holds fewer than {where.count} "
                         "elements")
    return data.astype(where.dtype.newbyteorder("="), copy=False).reshape(where.dims)
